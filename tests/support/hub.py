"""A stand-in Hugging Face hub for doctor's tests and benchmark: an HTTP
server on 127.0.0.1 (a thread, an ephemeral port) that answers what
huggingface_hub 2.x asks of a hub, read from its source
(hf_api.HfApi.model_info, file_download.get_hf_file_metadata and
hf_hub_download, utils/_http.hf_raise_for_status):

  GET  /api/models/{repo}[/revision/{rev}]   JSON: id, sha (the commit), siblings
  HEAD /{repo}/resolve/{rev}/{file}          X-Repo-Commit, ETag, Content-Length
                                             (LFS files: X-Linked-Etag, X-Linked-Size)
  GET  /{repo}/resolve/{rev}/{file}          the bytes, honouring Range (206,
                                             Content-Range); an LFS file (*.safetensors)
                                             answers 302 to /cdn/..., as the hub
                                             sends LFS files to its CDN
  errors as the hub words them (X-Error-Code): 401 RepoNotFound for a missing
  or private repo without a token, 401/403 GatedRepo, 404 RevisionNotFound,
  404 EntryNotFound (with X-Repo-Commit).

A repo is a folder per commit (its files, sparse where the test wrote them
so), branches and tags naming commits. `served` counts the body bytes sent;
`stall` makes answers to matching paths wait (a hub that does not answer);
`answer` hands requests for matching paths to a function of the test's (a
hostile hub: `never`, `drip`, `redirect_loop`, `body`, below).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest


@pytest.fixture(autouse=True)
def no_token(tmp_path, monkeypatch):
    """No token unless a test gives one (HF_TOKEN; no stored login), in every
    test of a module that takes the fixture (`no_token = hub.no_token`)."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))


LFS = (".safetensors", ".bin", ".pt", ".pth")
TOKEN = "hf_standin_token"


@dataclass
class Repo:
    commits: dict[str, Path] = field(default_factory=dict)  # commit -> its files
    refs: dict[str, str] = field(default_factory=dict)  # branch or tag -> commit
    gated: bool = False
    private: bool = False
    granted: frozenset[str] = frozenset({TOKEN})  # the tokens that may read it


class StandIn:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.served = 0  # body bytes sent
        self.log: list[tuple[str, str, str]] = []  # (method, path, Range)
        self.stall: dict[str, float] = {}  # path regex -> seconds to wait
        # path regex -> a function that answers the request (method, path) instead
        self.answer: dict[str, Answer] = {}
        self.url = ""
        self.closing = threading.Event()  # set when the server stops: a hung answer ends
        self._lock = threading.Lock()

    def add(
        self,
        repo: str,
        folder: Path,
        branch: str = "main",
        tags: tuple[str, ...] = (),
        **kw: object,
    ) -> str:
        """Publish `folder` as a new commit of `repo` on `branch` (and
        `tags`); its commit id."""
        r = self.repos.setdefault(repo, Repo(**kw))  # type: ignore[arg-type]
        commit = hashlib.sha1(f"{repo} {len(r.commits)} {folder}".encode()).hexdigest()
        r.commits[commit] = folder
        for name in (branch, *tags):
            r.refs[name] = commit
        return commit

    def reset(self) -> None:
        with self._lock:
            self.served = 0
            self.log.clear()

    @contextlib.contextmanager
    def running(self) -> Iterator[StandIn]:
        hub = self

        class Handler(_Handler):
            stand_in = hub

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        t = threading.Thread(target=httpd.serve_forever, daemon=True)
        t.start()
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        self.closing.clear()
        try:
            yield self
        finally:
            self.closing.set()
            httpd.shutdown()
            httpd.server_close()


def _etag(path: Path) -> str:
    """Git's blob id for a small file; for an LFS file the hub gives its
    sha256 (of the path and size here: the big files are sparse)."""
    size = path.stat().st_size
    if path.name.endswith(LFS):
        return hashlib.sha256(f"{path} {size}".encode()).hexdigest()
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    stand_in: StandIn
    protocol_version = "HTTP/1.1"
    ranges = True  # False: a server that ignores Range and sends the whole file
    # headers and body go out in two writes: without this, Nagle's algorithm
    # holds the second until the client's delayed ACK (40 ms a request)
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:
        pass

    # -- answers ------------------------------------------------------------

    def _send(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        # a client that gave up (a stalled answer's timeout) has closed the socket
        with contextlib.suppress(ConnectionError):
            self._answer(code, body, headers or {})

    def _answer(self, code: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
            with self.stand_in._lock:
                self.stand_in.served += len(body)

    def _error(self, code: int, error_code: str, message: str, commit: str = "") -> None:
        headers = {"X-Error-Code": error_code, "X-Error-Message": message}
        headers["Content-Type"] = "application/json"
        if commit:
            headers["X-Repo-Commit"] = commit
        self._send(code, json.dumps({"error": message}).encode(), headers)

    def _repo(self, name: str) -> Repo | None:
        """The repo, or None after answering the error the hub gives."""
        r = self.stand_in.repos.get(name)
        auth = self.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        if r is None or (r.private and token not in r.granted):
            self._error(401, "RepoNotFound", "Repository not found")
            return None
        if r.gated and token not in r.granted and self.path.find("/resolve/") >= 0:
            code = 403 if token else 401
            self._error(code, "GatedRepo", f"Access to model {name} is restricted")
            return None
        return r

    def _commit(self, r: Repo, rev: str) -> str | None:
        commit = r.refs.get(rev) or (rev if rev in r.commits else None)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return commit

    # -- requests -----------------------------------------------------------

    def do_HEAD(self) -> None:
        self._route()

    def do_GET(self) -> None:
        self._route()

    def _route(self) -> None:
        path = unquote(urlsplit(self.path).path)
        with self.stand_in._lock:
            self.stand_in.log.append((self.command, path, self.headers.get("Range", "")))
        for pattern, seconds in list(self.stand_in.stall.items()):
            if re.search(pattern, path):
                time.sleep(seconds)
        for pattern, answer in list(self.stand_in.answer.items()):
            if re.search(pattern, path):
                with contextlib.suppress(ConnectionError):
                    if answer(self, path) is not False:  # False: answered as the hub would
                        return
        m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/(.+))?$", path)
        if m:
            return self._model_info(m.group(1), m.group(2) or "main")
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            return self._resolve(m.group(1), m.group(2), m.group(3))
        m = re.match(r"^/cdn/([^/]+/[^/]+)/([0-9a-f]{40})/(.+)$", path)
        if m:
            return self._file(self.stand_in.repos[m.group(1)], m.group(2), m.group(3))
        self._send(404, b"not found")

    def _model_info(self, name: str, rev: str) -> None:
        r = self._repo(name)
        commit = r and self._commit(r, rev)
        if r is None or commit is None:
            return
        folder = r.commits[commit]
        files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        body = {
            "_id": hashlib.sha1(name.encode()).hexdigest()[:24],
            "id": name,
            "sha": commit,
            "private": r.private,
            "gated": "auto" if r.gated else False,
            "siblings": [{"rfilename": f} for f in files],
        }
        self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def _resolve(self, name: str, rev: str, file: str) -> None:
        r = self._repo(name)
        commit = r and self._commit(r, rev)
        if r is None or commit is None:
            return
        path = r.commits[commit] / file
        if not path.is_file():
            self._error(404, "EntryNotFound", f"{file} does not exist", commit)
            return
        if file.endswith(LFS) and self.command == "GET":
            where = f"/cdn/{name}/{commit}/{file}"
            headers = {"Location": where, "X-Repo-Commit": commit}
            headers.update({"X-Linked-Etag": f'"{_etag(path)}"'})
            headers["X-Linked-Size"] = str(path.stat().st_size)
            self._send(302, b"", headers)
            return
        self._file(r, commit, file)

    def _file(self, r: Repo, commit: str, file: str) -> None:
        path = r.commits[commit] / file
        size = path.stat().st_size
        headers = {"X-Repo-Commit": commit, "ETag": f'"{_etag(path)}"', "Accept-Ranges": "bytes"}
        if file.endswith(LFS):
            headers.update({"X-Linked-Etag": headers["ETag"], "X-Linked-Size": str(size)})
        start, end = 0, size
        m = re.match(r"^bytes=(\d+)-(\d*)$", self.headers.get("Range", "").strip())
        m = m if self.ranges else None
        if m:
            start = int(m.group(1))
            end = min(size, int(m.group(2)) + 1) if m.group(2) else size
            if start >= size:
                self._send(416, b"", {"Content-Range": f"bytes */{size}"})
                return
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        if self.command == "HEAD":
            self.send_response(200)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            return
        self.send_response(206 if m else 200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(end - start))
        self.end_headers()
        # in pieces: a client that asks for a whole 10 GB file and stops
        # reading costs what it read, not 10 GB of memory
        with open(path, "rb") as fh, contextlib.suppress(ConnectionError):
            fh.seek(start)
            left = end - start
            while left:
                piece = fh.read(min(left, 1 << 20))
                self.wfile.write(piece)
                with self.stand_in._lock:
                    self.stand_in.served += len(piece)
                left -= len(piece)


# -- a hostile hub: answers a test puts in StandIn.answer ----------------------------

Answer = Callable[[_Handler, str], "bool | None"]  # False: not this one, answer as the hub


def never(h: _Handler, path: str) -> None:
    """Takes the request and says nothing, until the server stops."""
    h.stand_in.closing.wait()


def drip(every: float = 2.0) -> Answer:
    """A GET answered 200 with a body (a long JSON string) that comes one
    byte every `every` seconds: each read answers in time, the whole never
    ends. A HEAD is answered as the hub answers it."""

    def answer(h: _Handler, path: str) -> bool | None:
        if h.command == "HEAD":
            return False
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(10**9))
        h.end_headers()
        h.wfile.write(b'"')
        while not h.stand_in.closing.wait(every):
            h.wfile.write(b"x")
            h.wfile.flush()
        return None

    return answer


def redirect_loop(h: _Handler, path: str) -> None:
    """A redirect to itself, for ever."""
    h._send(302, b"", {"Location": path})


def body(data: bytes, headers: dict[str, str] | None = None, status: int = 200) -> Answer:
    """These bytes (and headers), whatever was asked."""

    def answer(h: _Handler, path: str) -> None:
        h._send(status, data, {"Content-Type": "application/json", **(headers or {})})

    return answer


def sparse(path: Path, size: int) -> None:
    """Make `path` `size` bytes long without writing them (a sparse file:
    its data reads as zeros and takes no disk)."""
    os.truncate(path, size)
