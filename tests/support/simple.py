"""A stand-in package index on 127.0.0.1 for reading project pages (PEP 691):
each project's page lists the file names it was given, yanked or not, and
serves no files. It can be told to misbehave: answer something else than
the page (`answer`: a status, content type and body), or `hang` (take the
request and never answer) or `trickle` (answer a byte at a time, never
done), or `unsized` (no Content-Length: the body ends when the connection
does). A hung or trickling answer ends when the stand-in stops, so no test
leaves a thread behind. With `auth` ("user:password") it asks for HTTP
basic auth, as a private index does: 401 to a request without those
credentials; `authorization` lists the header of each request (None
where it had none).

`configured(monkeypatch)` starts one and points pip's configuration
(PIP_INDEX_URL), so vpatch's index, at it."""

from __future__ import annotations

import base64
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from vpatch.sources import index

PAGE_TYPE = index.ACCEPT
HELD = 30.0  # seconds a hung or trickling answer lasts at most, should a client wait it out


class Stand(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files: dict[str, list[dict[str, object]]] = {}
        self.answer: tuple[int, str, bytes] | None = None
        self.hang = False
        self.trickle = False
        self.unsized = False
        self.auth: str | None = None
        self.stopped = threading.Event()
        self.requests: list[str] = []
        self.authorization: list[str | None] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/simple/"

    def add(self, project: str, *names: str, yanked: bool | str = False) -> None:
        """List files on the project's page (`yanked`: PEP 592's flag or reason)."""
        listed = self.files.setdefault(project, [])
        for name in names:
            f: dict[str, object] = {"filename": name, "url": f"/files/{name}", "hashes": {}}
            if yanked:
                f["yanked"] = yanked
            listed.append(f)

    def page(self, project: str) -> bytes:
        return json.dumps(
            {"meta": {"api-version": "1.1"}, "name": project, "files": self.files[project]}
        ).encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Stand

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        s = self.server
        s.requests.append(self.path)
        s.authorization.append(self.headers.get("Authorization"))
        if s.auth is not None and self.headers.get("Authorization") != basic(s.auth):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="index"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if s.hang:
            s.stopped.wait(HELD)
            return
        project = self.path.strip("/").split("/")[-1]
        status, ctype, body = s.answer or (
            (200, PAGE_TYPE, s.page(project)) if project in s.files else (404, "text/plain", b"no")
        )
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if s.unsized:
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(body) if not s.trickle else 1 << 20))
        self.end_headers()
        if not s.trickle:
            self.wfile.write(body)
            return
        for _ in range(int(HELD / 0.1)):  # a byte each 0.1 s, until the stand-in stops
            try:
                self.wfile.write(b" ")
                self.wfile.flush()
            except OSError:  # the client gave up: what a trickle is for
                return
            if s.stopped.wait(0.1):
                return


def basic(credentials: str) -> str:
    """The Authorization header of HTTP basic auth for "user:password"."""
    return "Basic " + base64.b64encode(credentials.encode()).decode()


@contextmanager
def stand_in() -> Iterator[Stand]:
    httpd = Stand()
    t = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    t.start()
    try:
        yield httpd
    finally:
        httpd.stopped.set()
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def configured(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stand]:
    """A stand-in that pip's configuration names, vpatch's caches of the
    index cleared before and after."""
    with stand_in() as httpd, pip_names(monkeypatch, httpd.url):
        yield httpd


@contextmanager
def pip_names(monkeypatch: pytest.MonkeyPatch, url: str) -> Iterator[None]:
    """`url` is the index pip's configuration names for the block; vpatch's
    memoised index lookups cleared on both sides, so none outlives it."""
    monkeypatch.setenv("PIP_INDEX_URL", url)
    index.index_url.cache_clear()
    index.project.cache_clear()
    try:
        yield
    finally:
        index.index_url.cache_clear()
        index.project.cache_clear()
