"""`vpatch verify-wheel` on the overlay of the default release's official
CUDA wheel: its sm_100 device code is kept, its files match the patched
tree, and the extension modules went across as their compressed bytes."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from support import data_offset, series_of
from vpatch import lock
from vpatch.commands import verify_wheel as verify_cmd
from vpatch.sources import cache
from vpatch.wheel import fatbin, overlay

pytestmark = pytest.mark.integration

PINS = lock.load()
DEFAULT = PINS.default()


def raw_sha(path: Path, info: zipfile.ZipInfo) -> str:
    """sha256 of a member's compressed bytes as stored in the file."""
    with open(path, "rb") as f:
        f.seek(data_offset(path, info))
        h, left = hashlib.sha256(), info.compress_size
        while left:
            chunk = f.read(min(left, 1 << 22))
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def test_cuda_wheel_overlay_verifies_for_sm_100(tmp_path, default_tree):
    src = cache.download(DEFAULT.artifact("wheel"))
    res = overlay.overlay(src, series_of(PINS, DEFAULT), tmp_path / "dist")
    v = verify_cmd.verify_wheel(res.path, arch="sm_100", tree=default_tree, pins=lock.load())
    assert v.ok, v.to_text()
    core = {e.module: e for e in v.extensions if e.name.count("/") == 1}
    for mod in fatbin.CORE_EXTENSIONS:
        assert "sm_100" in core[mod].sass, fatbin.format_report([core[mod]])
    assert {f.status for f in v.files} == {"same"} and len(v.files) == len(res.replaced)
    # the extension modules went across as their original compressed bytes
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(res.path) as b:
        for name in ("vllm/_C.abi3.so", "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so"):
            assert raw_sha(res.path, b.getinfo(name)) == raw_sha(src, a.getinfo(name))
