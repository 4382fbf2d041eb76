"""A synthetic vLLM release, end to end: source files, an sdist and a wheel
made from them, a series (git format-patch), a checkout-like root
(VERSIONS.lock pinning the artifacts' sha256, patches/) and a stand-in
package index (PEP 691 JSON, files with HTTP range support) that can be
told to misbehave. Used by the hostile-input, crash and hostile-environment
tests; everything is deterministic, so two builds give the same bytes."""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.server
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import publish

VERSION = "9.9.0"
SDIST = f"vllm-{VERSION}.tar.gz"
WHEEL = f"vllm-{VERSION}-cp38-abi3-manylinux_2_31_x86_64.whl"
DATE = "2026-01-02T00:00:00+00:00"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_AUTHOR_DATE": DATE,
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_COMMITTER_DATE": DATE,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
MODEL = "".join(f"line {i}\n" for i in range(1, 41))


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    out = subprocess.run(
        ["git", *args], cwd=cwd, env={**env, **GIT_ENV}, check=True, capture_output=True
    )
    return out.stdout.decode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_files(bulk: int = 0) -> dict[str, bytes]:
    """The release's files; `bulk` more modules make unpacking take a while."""
    files = {
        "vllm/__init__.py": b"__version__ = '9.9.0'\n",
        "vllm/model.py": MODEL.encode(),
        "vllm/config.py": b"allow = ['llama']\n",
        # CRLF line ends: core.autocrlf in a caller's git config would change them
        "vllm/windows.py": b"a = 1\r\nb = 2\r\n",
        "README.md": b"tiny\n",
    }
    for i in range(bulk):
        files[f"vllm/bulk/mod_{i:04d}.py"] = f"value = {i}\n".encode() * 50
    return files


def make_sdist(path: Path, files: dict[str, bytes], top: str = f"vllm-{VERSION}") -> bytes:
    """A deterministic tar.gz with every file under top/."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(files[name]), 1700000000, 0o644
            tar.addfile(info, io.BytesIO(files[name]))
    data = gzip.compress(raw.getvalue(), mtime=0)
    path.write_bytes(data)
    return data


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    path: Path,
    files: dict[str, bytes],
    so_size: int = 1 << 20,
    record: bool = True,
    tamper: str = "",
) -> bytes:
    """A wheel of the release's vllm/ files plus an extension module of
    so_size random (seeded) bytes (none for 0); returns RECORD's bytes.
    `tamper` names a member whose bytes change after RECORD was written."""
    members = {n: d for n, d in files.items() if n.startswith("vllm/")}
    if so_size:
        members["vllm/_C.abi3.so"] = _random(so_size)
    di = f"vllm-{VERSION}.dist-info"
    members[f"{di}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}\n\n".encode()
    )
    members[f"{di}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp38-abi3-x\n"
    rows = [f"{n},sha256={_b64(d)},{len(d)}" for n, d in members.items()]
    rec = ("\n".join([*rows, f"{di}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            data = data + b"# tampered\n" if name == tamper else data
            info = zipfile.ZipInfo(name, (2026, 1, 2, 0, 0, 0))
            info.external_attr = 0o644 << 16
            kind = zipfile.ZIP_STORED if name.endswith(".so") else zipfile.ZIP_DEFLATED
            zf.writestr(info, data, kind)
        if record:
            info = zipfile.ZipInfo(f"{di}/RECORD", (2026, 1, 2, 0, 0, 0))
            zf.writestr(info, rec, zipfile.ZIP_DEFLATED)
    return rec


def _random(n: int) -> bytes:
    import random

    return random.Random(n).randbytes(n)


DEP3 = """
Description: {subject}
Origin: vendor
Forwarded: not-needed
Last-Update: 2026-01-02
"""


def make_series(
    work: Path, out: Path, files: dict[str, bytes], steps: list[tuple[str, dict]]
) -> Path:
    """A series folder: each (subject, {path: new bytes}) step becomes one
    `git format-patch` file made on top of files."""
    work.mkdir(parents=True)
    git(work, "init", "-q")
    for name, data in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(data)
    git(work, "add", "-A")
    git(work, "commit", "-qm", "base")
    out.mkdir(parents=True)
    names = []
    for i, (subject, changes) in enumerate(steps, 1):
        for name, data in changes.items():
            (work / name).write_bytes(data)
        git(work, "add", "-A")
        git(work, "commit", "-qm", subject + "\n" + DEP3.format(subject=subject))
        name = f"{i:04d}-" + re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-") + ".patch"
        args = ("format-patch", "--stdout", "--keep-subject", "--no-signature", "--full-index")
        (out / name).write_text(git(work, *args, "-1"))
        names.append(name)
    (out / "series").write_text("\n".join(names) + "\n")
    return out


def default_steps() -> list[tuple[str, dict]]:
    return [
        (
            "model: first change",
            {"vllm/model.py": MODEL.replace("line 5\n", "line five\n").encode()},
        ),
        ("config: allow deepseek", {"vllm/config.py": b"allow = ['llama', 'deepseek']\n"}),
        # a trailing blank and trailing whitespace: apply.whitespace=fix would change them
        (
            "model: trailing space",
            {
                "vllm/model.py": MODEL.replace("line 5\n", "line five\n")
                .replace("line 30\n", "line 30   \n\n")
                .encode()
            },
        ),
    ]


@dataclass
class Release:
    """A synthetic release on disk: root (VERSIONS.lock + patches/), the
    artifacts (www/), the sources."""

    root: Path
    www: Path
    files: dict[str, bytes]
    sdist: Path
    wheel: Path
    record_sha256: str

    @property
    def series(self) -> Path:
        """The release's series as a plain folder (what the patch set was made from)."""
        return self.root.parent / "series"


def write_lock(root: Path, arts: dict[str, tuple[str, bytes]], record_sha: str = "") -> None:
    """VERSIONS.lock pinning {kind: (file name, bytes)} for the release."""
    lines = [
        f'[releases."{VERSION}"]',
        'tag = "v9.9.0"',
        'commit = "abc1234"',
        'status = "patched"',
    ]
    for kind, (name, data) in arts.items():
        lines += [
            "",
            f'[releases."{VERSION}".artifacts.{kind}]',
            f'filename = "{name}"',
            f'sha256 = "{sha256(data)}"',
            f"size = {len(data)}",
        ]
        if kind != "sdist" and record_sha:
            lines.append(f'record_sha256 = "{record_sha}"')
    (root / "VERSIONS.lock").write_text("\n".join(lines) + "\n")


def make_release(base: Path, bulk: int = 0, so_size: int = 1 << 20) -> Release:
    """root/, www/ (the index's files) and a series under base."""
    files = source_files(bulk)
    root, www = base / "root", base / "www"
    www.mkdir(parents=True)
    sdist, wheel = www / SDIST, www / WHEEL
    make_sdist(sdist, files)
    rec = make_wheel(wheel, files, so_size)
    make_series(base / "series-work", base / "series", files, default_steps())
    publish(root, VERSION, base / "series")
    meta = root / "patches" / "patches.toml"
    meta.write_text(
        meta.read_text().replace(
            '["model-first-change"]\n',
            '["model-first-change"]\nprobe = [{ file = "vllm/model.py", uses = "five" }]\n',
        )
    )
    arts = {"sdist": (SDIST, sdist.read_bytes()), "wheel": (WHEEL, wheel.read_bytes())}
    write_lock(root, arts, sha256(rec))
    return Release(root, www, files, sdist, wheel, sha256(rec))


# -- a stand-in package index ------------------------------------------------------------


class Index(http.server.ThreadingHTTPServer):
    """PEP 691 pages for /simple/<project>/ and the files of `www` under
    /files/. `mode`: "json" (a correct index), "html" (an index without the
    JSON API), "broken" (JSON that does not parse). `ranges`: "ok" (HEAD and
    206 answers say Accept-Ranges: bytes), "ignore" (HEAD says so, but a
    range request gets 200 and the whole file: the body is held back until
    `release` is set, so a client that reads it hangs), "no-accept" (no
    Accept-Ranges anywhere), "no-head" (HEAD refused: 405), "short", "long"
    (206 with fewer or more bytes than asked)."""

    daemon_threads = True

    def __init__(self, www: Path):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.www = www
        self.mode = "json"
        self.ranges = "ok"
        self.log: list[tuple[str, str, int]] = []  # (path, Range header, status)
        self.release = threading.Event()
        self.holding = 0  # answers whose body is held back (ranges = "ignore")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/simple/"

    def page(self, project: str) -> bytes:
        files = []
        for p in sorted(self.www.iterdir()):
            name = p.name.replace("_", "-")
            if name.startswith(project + "-") and p.is_file():
                data = p.read_bytes()
                files.append(
                    {
                        "filename": p.name,
                        "url": f"/files/{p.name}",
                        "hashes": {"sha256": sha256(data)},
                        "size": len(data),
                    }
                )
        return json.dumps(
            {"meta": {"api-version": "1.1"}, "name": project, "files": files, "versions": [VERSION]}
        ).encode()

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a killed client: expected
            super().handle_error(request, client_address)  # type: ignore[arg-type]

    def full_downloads(self, name: str) -> int:
        return sum(1 for p, r, s in self.log if p == f"/files/{name}" and not r and s == 200)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Index

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self) -> None:
        s = self.server
        path = s.www / self.path.removeprefix("/files/")
        found = self.path.startswith("/files/") and path.is_file()
        status = (405 if s.ranges == "no-head" else 200) if found else 404
        s.log.append((self.path, "HEAD", status))
        self.send_response(status)
        self.send_header("Content-Length", str(path.stat().st_size if found else 0))
        if found and s.ranges != "no-accept":  # "ignore": says so, then does not
            self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self) -> None:
        s = self.server
        rng = self.headers.get("Range", "")
        if self.path.startswith("/simple/"):
            s.log.append((self.path, rng, 200))
            project = self.path.split("/")[2]
            if s.mode == "html":
                self._send(200, b"<html><body><a href='x'>x</a></body></html>", "text/html")
            elif s.mode == "broken":
                self._send(200, b'{"files": [', "application/vnd.pypi.simple.v1+json")
            else:
                self._send(200, s.page(project), "application/vnd.pypi.simple.v1+json")
            return
        path = s.www / self.path.removeprefix("/files/")
        if not self.path.startswith("/files/") or not path.is_file():
            s.log.append((self.path, rng, 404))
            self._send(404, b"no", "text/plain")
            return
        data = path.read_bytes()
        m = re.match(r"bytes=(\d+)-(\d+)", rng)
        accept = {"Accept-Ranges": "bytes"}
        if not m:
            s.log.append((self.path, rng, 200))
            self._send(200, data, "application/octet-stream", accept)
            return
        start, end = int(m.group(1)), min(int(m.group(2)) + 1, len(data))
        if s.ranges == "ignore":
            s.log.append((self.path, rng, 200))
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:1024])
            self.wfile.flush()
            s.holding += 1  # the rest of the body is held back: a client reading it waits
            s.release.wait(60)
            s.holding -= 1
            return
        part = data[start:end]
        headers = {"Content-Range": f"bytes {start}-{end - 1}/{len(data)}", **accept}
        if s.ranges == "no-accept":
            del headers["Accept-Ranges"]
        elif s.ranges == "short":
            part = part[: max(0, len(part) - 7)]
        elif s.ranges == "long":
            part = part + data[end : end + 7] + b"x" * 7
        s.log.append((self.path, rng, 206))
        self._send(206, part, "application/octet-stream", headers)


@contextmanager
def serve(www: Path) -> Iterator[Index]:
    httpd = Index(www)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield httpd
    finally:
        httpd.release.set()
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def serving(www: Path, cache: Path, monkeypatch: Any) -> Iterator[Index]:
    """serve(www) as this process's package index (PIP_INDEX_URL) with an
    empty vpatch cache; vpatch's memoised index lookups cleared both ways."""
    from support.simple import pip_names  # imports vpatch, which this module does not need

    monkeypatch.setenv("VPATCH_CACHE", str(cache))
    with serve(www) as idx, pip_names(monkeypatch, idx.url):
        yield idx


def closed_port() -> str:
    """An index URL nobody answers on."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/simple/"


# -- snapshots ------------------------------------------------------------------------------

# .git files a failed run may touch without changing the repository's state:
# the index's stat cache, reflogs, ORIG_HEAD, new unreachable objects
VOLATILE = re.compile(r"(^|/)\.git/(index|logs/.*|ORIG_HEAD|FETCH_HEAD|COMMIT_EDITMSG|objects/.*)$")


def snapshot(top: Path, skip: tuple[str, ...] = ()) -> dict[str, tuple]:
    """{relative path: (kind, mode, sha256 or link target)} of everything under top."""
    out: dict[str, tuple] = {}
    if not top.exists() and not top.is_symlink():
        return out
    if not top.is_dir() or top.is_symlink():
        return {".": _entry(top)}
    for dirpath, dirs, names in os.walk(top):
        dirs.sort()
        for name in sorted(dirs + names):
            p = Path(dirpath, name)
            rel = p.relative_to(top).as_posix()
            if any(rel == s or rel.startswith(s + "/") for s in skip):
                continue
            out[rel] = _entry(p)
    return out


def _entry(p: Path) -> tuple:
    st = p.lstat()
    if p.is_symlink():
        return ("link", 0, os.readlink(p))
    if p.is_dir():
        return ("dir", st.st_mode & 0o7777, "")
    return ("file", st.st_mode & 0o7777, sha256(p.read_bytes()))


def same(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """What differs between two snapshots, .git's volatile files aside (a
    .git object present before must still be there, unchanged)."""
    diffs = []
    for k in sorted(set(before) | set(after)):
        if before.get(k) == after.get(k):
            continue
        if VOLATILE.search(k) and (k not in before or "/objects/" not in f"/{k}"):
            continue
        diffs.append(f"{k}: {before.get(k)} -> {after.get(k)}")
    return diffs
