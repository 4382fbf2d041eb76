"""Fixtures of the sources tests: a download cache of the test's own, and a
local HTTP server that answers range requests, holding a wheel the stand-in
index lists."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import REMOTE_MEMBERS, RangeHandler, make_wheel, record_of, serve
from vpatch import lock
from vpatch.sources import cache, index


@pytest.fixture(autouse=True)
def _own_cache(cache_root: Path) -> Path:
    return cache_root


@pytest.fixture
def range_server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """(folder served, base URL); RangeHandler.ranges may be switched off."""
    root = tmp_path / "www"
    root.mkdir()
    RangeHandler.requests = 0
    with serve(lambda *a, **k: RangeHandler(*a, directory=str(root), **k)) as url:
        yield root, url
    RangeHandler.ranges = True


@pytest.fixture
def remote_wheel(range_server, monkeypatch) -> Callable[..., tuple[Path, lock.Artifact]]:
    """make(tamper=None, record_sha=None) -> (the served wheel, its artifact):
    the index (cache.index_files) lists it at the server; the artifact's
    record_sha256 is its RECORD's unless record_sha says otherwise."""
    root, base = range_server

    def make(tamper: str | None = None, record_sha: str | None = None):
        whl = make_wheel(root, version="1.0", files=REMOTE_MEMBERS, tamper=tamper)
        sha = hashlib.sha256(whl.read_bytes()).hexdigest()
        found = index.IndexFile(whl.name, base + whl.name, sha, whl.stat().st_size)
        monkeypatch.setattr(cache, "index_files", lambda project: {whl.name: found})
        record = record_sha or hashlib.sha256(record_of(whl)).hexdigest()
        return whl, lock.Artifact("wheel", whl.name, sha, found.size, record)

    return make
