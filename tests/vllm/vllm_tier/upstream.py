"""vLLM's own tests, from a release's sdist: ``upstream/<release>/tests``."""

from __future__ import annotations

import tarfile
from pathlib import Path

from vpatch import sources

from . import cache
from .releases import pins

# 0.15.x has no sdist on the index: it borrows 0.16.0's tests (only files that
# run there, see test_releases.py).
TESTS_FROM = {"0.15.0": "0.16.0", "0.15.1": "0.16.0"}


def tests_of(release: str) -> str:
    return TESTS_FROM.get(release, release)


def ensure(release: str) -> Path | None:
    """The folder holding the sdist's ``tests/``, or None without an sdist."""
    src = tests_of(release)
    art = pins().get(src).artifacts.get("sdist")
    if art is None:
        return None

    def make(out: Path) -> None:
        top = f"vllm-{src}/"
        with tarfile.open(sources.download(art)) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(top + "tests/")]
            for m in members:
                m.name = m.name[len(top) :]
            tar.extractall(out, members=members, filter="data")

    return cache.built(cache.root() / "upstream" / src, art.sha256, make, f"vLLM {src}'s own tests")
