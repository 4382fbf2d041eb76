"""Fetching a wheel's members alone, with HTTP range requests, against a local
server; trust comes from the lock's RECORD hash."""

import base64
import hashlib
import http.server
import random
import re
import threading
import zipfile
from pathlib import Path

import pytest
from vpatch import lock, sources
from vpatch.errors import IntegrityError, NetworkError
from vpatch.sources import cache, extract, index, lazy


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    ranges = True

    def log_message(self, *args):
        pass

    def do_GET(self):
        data = Path(self.directory, self.path.lstrip("/")).read_bytes()
        m = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if m and self.ranges:
            start, end = int(m.group(1)), int(m.group(2)) + 1
            self.send_response(206)
            data = data[start:end]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def end_headers(self):
        self.send_header("Accept-Ranges", "bytes")  # a server that honours ranges says so
        super().end_headers()


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = lambda *a, **k: RangeHandler(*a, directory=str(root), **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    RangeHandler.ranges = True


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(path: Path, members: dict[str, bytes], tamper: str | None = None) -> bytes:
    """A wheel with a correct RECORD (unless `tamper` names a member whose
    content changes after RECORD was written); returns RECORD's bytes."""
    rows = [f"{n},sha256={_b64(d)},{len(d)}" for n, d in members.items()]
    record = ("\n".join([*rows, "vllm-1.0.dist-info/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, b"tampered" if name == tamper else data)
        zf.writestr("vllm-1.0.dist-info/RECORD", record)
    return record


MEMBERS = {
    "vllm/a.py": b"a = 1\n" * 100,
    "vllm/_C.abi3.so": random.Random(0).randbytes(3 << 20),  # 3 MB the tree does not need
    "vllm/sub/b.py": b"b = 2\n",
}


def setup(server, monkeypatch, tamper=None, record_sha=None):
    root, base = server
    whl = root / "vllm-1.0-cp38-abi3-manylinux_2_31_x86_64.whl"
    record = make_wheel(whl, MEMBERS, tamper)
    sha = hashlib.sha256(whl.read_bytes()).hexdigest()
    found = index.IndexFile(whl.name, base + whl.name, sha, whl.stat().st_size)
    monkeypatch.setattr(cache, "index_files", lambda project: {whl.name: found})
    art = lock.Artifact(
        "wheel", whl.name, sha, found.size, record_sha or hashlib.sha256(record).hexdigest()
    )
    return whl, art


def test_members_alone_are_fetched_and_checked(server, monkeypatch, tmp_path):
    whl, art = setup(server, monkeypatch)
    dest = tmp_path / "dest"
    dest.mkdir()
    fetched = extract.extract_wheel_lazy(art, dest)
    got = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert got == ["vllm/a.py", "vllm/sub/b.py"]
    assert (dest / "vllm/a.py").read_bytes() == MEMBERS["vllm/a.py"]
    assert 0 < fetched < (1 << 20) < whl.stat().st_size  # the extension module never crossed
    assert extract.record_sha256(server[1] + whl.name, art.size) == art.record_sha256


def test_member_that_does_not_match_record_writes_nothing(server, monkeypatch, tmp_path):
    _, art = setup(server, monkeypatch, tamper="vllm/sub/b.py")
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(IntegrityError, match="vllm/sub/b.py does not match its RECORD"):
        extract.extract_wheel_lazy(art, dest)
    assert list(dest.iterdir()) == []


def test_record_that_does_not_match_the_lock(server, monkeypatch, tmp_path):
    _, art = setup(server, monkeypatch, record_sha="0" * 64)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(IntegrityError, match="record_sha256"):
        extract.extract_wheel_lazy(art, dest)
    assert list(dest.iterdir()) == []


def test_materialize_prefers_the_cache_then_ranges(server, monkeypatch, tmp_path):
    monkeypatch.setenv("VPATCH_CACHE", str(tmp_path / "cache"))
    _, art = setup(server, monkeypatch)
    rel = lock.Release("1.0", "v1.0", "c", "patched", "", {"wheel": art})
    calls = []
    real = extract.extract_wheel_lazy
    monkeypatch.setattr(sources, "extract_wheel_lazy", lambda a, d: calls.append(a) or real(a, d))
    (tmp_path / "d1").mkdir()
    assert sources.materialize(rel, "wheel", tmp_path / "d1") == art.filename
    assert calls == [art]
    cache.download(art)  # now the whole wheel is cached
    (tmp_path / "d2").mkdir()
    sources.materialize(rel, "wheel", tmp_path / "d2")
    assert calls == [art]  # the cached file was used
    assert (tmp_path / "d1/vllm/a.py").read_bytes() == (tmp_path / "d2/vllm/a.py").read_bytes()


def test_server_without_ranges_is_a_clear_error(server, monkeypatch, tmp_path):
    whl, art = setup(server, monkeypatch)
    RangeHandler.ranges = False
    with pytest.raises(NetworkError, match="ignores range requests"):
        lazy.RangeFile(server[1] + whl.name, art.size).read(10)
