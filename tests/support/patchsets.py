"""A patch set made in a test: two exports of changes to BASE (the `two`
fixture) and a patches.toml with the variant files it names (write()), for
the patch set's reading and writing tests (tests/unit/test_patchset.py,
tests/unit/test_patchset_write.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from vpatch import patchset, quilt

from . import BASE, change, make_series, text_file

MODEL = BASE["vllm/model.py"]
PINNED = ["1.0", "1.1", "1.2", "2.0"]


def patches(tmp: Path, steps) -> list[bytes]:
    made = make_series(tmp, BASE, steps)
    return [p.path.read_bytes() for p in quilt.load(made).patches]


@pytest.fixture
def two(tmp_path) -> list[bytes]:
    """Two exports: model.py's line 5, then config.py's allow list."""
    (tmp_path / "w").mkdir()
    return patches(
        tmp_path / "w",
        [
            ("model: five", {"vllm/model.py": change(MODEL, "line 5\n", "line five\n")}),
            ("config: allow deepseek", {"vllm/config.py": "allow = ['llama', 'deepseek']\n"}),
        ],
    )


def write(root: Path, toml: str, files: dict[str, bytes]) -> patchset.PatchSet:
    """patches.toml under root/patches, with its variant files, loaded."""
    path = text_file(root / "patches" / "patches.toml", toml)
    for name, data in files.items():
        (path.parent / name).parent.mkdir(parents=True, exist_ok=True)
        (path.parent / name).write_bytes(data)
    return patchset.load(path)
