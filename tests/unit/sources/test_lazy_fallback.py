"""A server that does not honour range requests: the lazy wheel reader
raises RangeUnsupported, and `materialize` and `lock --refresh` fall back to
one full, hash-checked download, with the same result as the range path."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import synthetic as S
from vpatch import lock, sources
from vpatch.errors import RangeUnsupported
from vpatch.sources import lazy, refresh

BAD = ["ignore", "no-accept", "no-head", "short", "long"]


@pytest.fixture(scope="module")
def rel(tmp_path_factory) -> S.Release:
    return S.make_release(tmp_path_factory.mktemp("lazy"), so_size=3 << 20)


@pytest.fixture
def server(rel, tmp_path, monkeypatch) -> Iterator[S.Index]:
    with S.serving(rel.www, tmp_path / "cache", monkeypatch) as idx:
        yield idx


def tree(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in d.rglob("*") if p.is_file()}


def materialize(rel: S.Release, dest: Path) -> list[str]:
    said: list[str] = []
    release = lock.load(rel.root / "VERSIONS.lock").get(S.VERSION)
    dest.mkdir()
    assert sources.materialize(release, "wheel", dest, say=said.append) == S.WHEEL
    return said


def downloads(tmp_path: Path) -> list[str]:
    d = tmp_path / "cache" / "downloads"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


@pytest.mark.parametrize("mode", BAD)
def test_materialize_falls_back_to_one_full_download(mode, rel, server, tmp_path):
    ranged = materialize(rel, tmp_path / "ranged")  # the server honours ranges
    assert ranged == [] and server.full_downloads(S.WHEEL) == 0
    assert downloads(tmp_path) == []  # range reads cache nothing
    server.ranges = mode
    said = materialize(rel, tmp_path / "fallback")
    assert tree(tmp_path / "fallback") == tree(tmp_path / "ranged")
    assert server.full_downloads(S.WHEEL) == 1
    assert downloads(tmp_path) == [S.WHEEL]  # the whole wheel, checked against the lock
    assert (tmp_path / "cache" / "downloads" / S.WHEEL).read_bytes() == rel.wheel.read_bytes()
    assert len([m for m in said if "downloading the whole wheel" in m]) == 1
    if mode == "ignore":
        # one range request got the whole file; its body was not waited for
        assert [s for _, r, s in server.log if r.startswith("bytes=") and s == 200] == [200]
        assert server.holding == 1


@pytest.mark.parametrize("mode", BAD)
def test_range_file_refuses(mode, rel, server):
    server.ranges = mode
    f = lazy.RangeFile(
        server.url.replace("/simple/", "/files/") + S.WHEEL, rel.wheel.stat().st_size
    )
    with pytest.raises(RangeUnsupported):
        f.read(100)


def test_no_size_no_ranges():
    with pytest.raises(RangeUnsupported, match="no size"):
        lazy.RangeFile("http://127.0.0.1:9/x.whl", 0)


@pytest.mark.parametrize("mode", ["ok", *BAD])
def test_lock_refresh_reads_record_either_way(mode, rel, server, tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    arts = {"sdist": (S.SDIST, rel.sdist.read_bytes()), "wheel": (S.WHEEL, rel.wheel.read_bytes())}
    S.write_lock(root, arts)  # no record_sha256 yet
    server.ranges = mode
    said: list[str] = []
    pins = refresh.refresh(lock.load(root / "VERSIONS.lock"), said.append)
    got = pins.releases[S.VERSION].artifacts["wheel"].record_sha256
    assert got == rel.record_sha256
    with_record = lock.load(rel.root / "VERSIONS.lock").releases[S.VERSION].artifacts["wheel"]
    assert got == with_record.record_sha256
    assert server.full_downloads(S.WHEEL) == (0 if mode == "ok" else 1)
    assert hashlib.sha256(rel.wheel.read_bytes()).hexdigest() == with_record.sha256
