"""A wheel-only release's source tree (VERSIONS.lock pins no sdist for it)
from the official wheel by range requests: a few MB instead of the wheel's
hundreds, and the same files as the whole wheel gives."""

import hashlib

import pytest
from vpatch import lock
from vpatch.sources import cache, extract

pytestmark = pytest.mark.integration


def _digest(root):
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_lazy_tree_equals_the_whole_wheel_tree(tmp_path):
    pins = lock.load()
    wheel_only = [v for v in pins.versions() if "sdist" not in pins.get(v).artifacts]
    art = pins.get(wheel_only[-1]).artifact("wheel")
    lazy_dest, full_dest = tmp_path / "lazy", tmp_path / "full"
    lazy_dest.mkdir()
    full_dest.mkdir()
    fetched = extract.extract_wheel_lazy(art, lazy_dest)
    assert fetched < 20e6 < art.size
    extract.extract_wheel(cache.download(art), full_dest)
    got, want = _digest(lazy_dest), _digest(full_dest)
    assert "vllm/model_executor/models/deepseek_v2.py" in got
    assert got == want
