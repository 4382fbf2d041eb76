"""Fixtures of the integration tier: real releases' trees, patched once per
session (the sources come from the cache, sha256-verified)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from vpatch import lock
from vpatch.commands import apply


@pytest.fixture(scope="session")
def real_tree(tmp_path_factory) -> Callable[[str], Path]:
    """tree(version): the release's pinned source with its series applied,
    made on first use. Tests only read it."""
    made: dict[str, Path] = {}

    def tree(version: str) -> Path:
        if version not in made:
            dest = tmp_path_factory.mktemp("trees") / f"vllm-{version}"
            apply.apply(version, dest=dest, pins=lock.load())
            made[version] = dest
        return made[version]

    return tree


@pytest.fixture(scope="session")
def default_tree(real_tree) -> Path:
    """The default release (the newest patched one), patched."""
    return real_tree(lock.load().default().version)
