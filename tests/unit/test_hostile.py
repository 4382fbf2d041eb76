"""Hostile inputs for every subcommand. Each case asserts the documented exit
code (docs/install.md, "Errors and exit codes"), exactly one `vpatch: error:` line on stderr (the
last one; progress lines may precede it), no traceback, nothing changed
anywhere in the sandbox (the destination included: files, modes, symlinks;
.git's index, reflogs and new unreachable objects aside), and no temporary
file left in the cache or in TMPDIR.

Most cases run `vpatch.cli.main` in this process (file-system faults are
injected there with an audit hook: an OSError(ENOSPC / EROFS / EACCES) for
any file created under a path, as a full or read-only disk gives); the
`sub` ones run `python -m vpatch.cli` to show no traceback reaches stderr.
"""

# Over 600 lines: the corpus (CASES) is one table of hostile cases, data rather
# than code, with the sandbox and the runner every case shares above it; split,
# each part would import them from another test module

from __future__ import annotations

import errno
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support import copy_rules
from support import synthetic as S
from support.cli import command, environment, vpatch
from vpatch import cli, gitutil, lock
from vpatch.sources import index

# -- the world: a synthetic release, three stand-in indexes, a vpatch tree ----


@dataclass
class World:
    rel: S.Release
    urls: dict[str, str]  # good / html / broken / closed
    tree: Path  # a patched vpatch tree of the release
    base: Path  # a tree at its baseline (unapplied)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("world")
    rel = S.make_release(base)
    S.make_wheel(rel.www / NO_RECORD, S.source_files(), 1024, record=False)
    S.make_wheel(rel.www / TAMPERED, S.source_files(), 0, tamper="vllm/model.py")
    with S.serve(rel.www) as good, S.serve(rel.www) as html, S.serve(rel.www) as broken:
        html.mode, broken.mode = "html", "broken"
        urls = {"good": good.url, "html": html.url, "broken": broken.url}
        urls["closed"] = S.closed_port()
        env = {
            **os.environ,
            "VPATCH_ROOT": str(rel.root),
            "VPATCH_CACHE": str(base / "cache"),
            "PIP_INDEX_URL": good.url,
        }
        tree = base / "tree"
        r = vpatch("apply", "--dest", str(tree), env=env)
        assert r.returncode == 0, r.stderr
        at_base = base / "at-base"
        shutil.copytree(tree, at_base, symlinks=True)
        S.git(at_base, "reset", "-q", "--hard", "vpatch/base-9.9.0")
        yield World(rel, urls, tree, at_base)


# -- a sandbox per case --------------------------------------------------------


@dataclass
class Box:
    world: World
    dir: Path
    index: str = "good"
    env: dict[str, str] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.dir / "root"

    @property
    def cache(self) -> Path:
        return self.dir / "cache"

    @property
    def downloads(self) -> Path:
        return self.cache / "downloads"

    @property
    def work(self) -> Path:
        return self.dir / "work"

    @property
    def series(self) -> list[Path]:
        """The files of the root's series, in order (in the patch set)."""
        series = lock.load(self.root / "VERSIONS.lock").series(S.VERSION)
        return [p.path for p in series.patches] if series else []

    def seed(self, *names: str) -> None:
        """Put artifacts into the cache."""
        self.downloads.mkdir(parents=True, exist_ok=True)
        for name in names:
            shutil.copy(self.world.rel.www / name, self.downloads / name)

    def pin(self, kind: str, name: str, data: bytes, cache: bool = True) -> None:
        """The lock pins these bytes as the release's `kind` artifact, named
        `name` (cached, unless not `cache`: then the index serves it)."""
        if cache:
            self.downloads.mkdir(parents=True, exist_ok=True)
            (self.downloads / name).write_bytes(data)
        www = self.world.rel.www
        arts = {
            "sdist": (S.SDIST, (www / S.SDIST).read_bytes()),
            "wheel": (S.WHEEL, (www / S.WHEEL).read_bytes()),
        }
        arts[kind] = (name, data)
        S.write_lock(self.root, arts, "0" * 64)

    def tree(self, name: str = "tree", at_base: bool = False) -> Path:
        dest = self.dir / name
        shutil.copytree(self.world.base if at_base else self.world.tree, dest, symlinks=True)
        return dest

    def damage_object(self, tree: Path) -> None:
        """Garbage in place of the loose object of HEAD's commit."""
        head = S.git(tree, "rev-parse", "HEAD").strip()
        obj = tree / ".git" / "objects" / head[:2] / head[2:]
        obj.chmod(0o644)
        obj.write_bytes(b"garbage, not zlib")

    def patch(self, edit: Callable[[bytes], bytes], which: int = 0) -> None:
        """Rewrite one patch file of the root's series."""
        p = self.series[which]
        p.write_bytes(edit(p.read_bytes()))


@pytest.fixture
def box(world, tmp_path) -> Box:
    b = Box(world, tmp_path / "sb")
    shutil.copytree(world.rel.root, b.root)
    for d in ("work", "home", "tmp"):
        (b.dir / d).mkdir(parents=True)
    return b


# -- file-system faults --------------------------------------------------------

_FAULT: dict[str, object] = {}
_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_CREATE = {"os.mkdir", "os.rename", "os.replace", "os.symlink", "os.link", "os.truncate"}


def _hook(event: str, args: tuple) -> None:
    if not _FAULT:
        return
    if event == "open":
        path, mode, flags = args
        if not (isinstance(flags, int) and flags & _WRITE):
            return
    elif event in _CREATE:
        path = args[1] if event in ("os.rename", "os.replace", "os.link") else args[0]
    else:
        return
    if not isinstance(path, (str, bytes, os.PathLike)):
        return
    p = os.path.abspath(os.fsdecode(path))
    under = str(_FAULT["under"])
    if p != under and not p.startswith(under + os.sep):
        return
    left = int(_FAULT["after"])  # type: ignore[call-overload]
    if left > 0:
        _FAULT["after"] = left - 1
        return
    code = int(_FAULT["errno"])  # type: ignore[call-overload]
    raise OSError(code, os.strerror(code), p)


sys.addaudithook(_hook)


@contextmanager
def fault(under: Path, code: int, after: int = 0) -> Iterator[None]:
    """OSError(code) for every file or folder created under `under`, after
    the first `after` succeed."""
    _FAULT.update(under=str(under.resolve() if under.exists() else under), errno=code, after=after)
    try:
        yield
    finally:
        _FAULT.clear()


# -- running a case ----------------------------------------------------------------


def env_of(box: Box) -> dict[str, str]:
    return {
        "VPATCH_ROOT": str(box.root),
        "VPATCH_CACHE": str(box.cache),
        "PIP_INDEX_URL": box.world.urls[box.index],
        "HOME": str(box.dir / "home"),
        "TMPDIR": str(box.dir / "tmp"),
        **box.env,
    }


def run(box: Box, argv: list[str], monkeypatch, capsys, how: str = "inproc", **kw) -> tuple:
    if how == "sub":
        r = vpatch(*argv, env={**os.environ, **env_of(box)}, cwd=box.work)
        return r.returncode, r.stderr
    for k, v in env_of(box).items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(box.work)
    monkeypatch.setattr(tempfile, "tempdir", str(box.dir / "tmp"))
    index.index_url.cache_clear()
    index.project.cache_clear()
    capsys.readouterr()
    try:
        under = kw.get("fault")
        try:
            if under is not None:
                with fault(under[0], under[1], under[2] if len(under) > 2 else 0):
                    code = cli.main(argv)
            else:
                code = cli.main(argv)
        except SystemExit as e:  # argparse: --help, or a usage error (said in one line)
            code = int(e.code or 0)
    finally:
        index.index_url.cache_clear()
        index.project.cache_clear()
    return code, capsys.readouterr().err


def check(box: Box, code: int, err: str, want: int, before: dict) -> None:
    lines = err.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("vpatch: error:")]
    if os.environ.get("SHOW"):
        print(f"\n{code}: {errors}")
    assert code == want, err
    assert len(errors) == 1 and lines[-1] == errors[0], err
    assert "Traceback" not in err and "internal error" not in err, err
    assert S.same(before, S.snapshot(box.dir, skip=("cache",))) == []
    leftovers = [p.name for p in box.cache.rglob(".*") if p.name.endswith((".part", ".tmp"))]
    assert leftovers == []
    assert list((box.dir / "tmp").iterdir()) == []


# -- the corpus ------------------------------------------------------------------------

Setup = Callable[[Box], list[str]]


def not_gzip(b: Box) -> None:
    b.pin("sdist", S.SDIST, b"this is not a gzip file\n" * 100)


NO_RECORD = "vllm-9.9.0-py3-none-any.whl"  # in the index's files: a wheel without RECORD
TAMPERED = "vllm-9.9.0-py3-none-win32.whl"  # vllm/model.py is not what RECORD says, no .so


def no_record(b: Box) -> None:
    """The lock pins a wheel without RECORD, cached."""
    b.pin("wheel", NO_RECORD, (b.world.rel.www / NO_RECORD).read_bytes())


def no_record_remote(b: Box) -> None:
    """... not cached: read with range requests."""
    b.pin("wheel", NO_RECORD, (b.world.rel.www / NO_RECORD).read_bytes(), cache=False)


def flip(b: Box, name: str) -> None:
    b.seed(name)
    p = b.downloads / name
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))


def truncated(d: bytes) -> bytes:
    return d[: len(d) * 2 // 3]


def garbled(d: bytes) -> bytes:
    head, _, tail = d.partition(b"\n@@ ")
    return head + b"\n@@ this is no hunk @@\n+++ nonsense\n-- more\n" + tail[len(tail) // 2 :]


def crlf(d: bytes) -> bytes:
    return d.replace(b"\n", b"\r\n")


def binary(d: bytes) -> bytes:
    return d.replace(b"line five", b"line \x00\x01\x02 five", 1)


def latin1(d: bytes) -> bytes:
    return d.replace(b"line five", b"line f\xeff\xe9 five", 1)


PATCH_EDITS = {
    "truncated": truncated,
    "garbled": garbled,
    "crlf": crlf,
    "binary": binary,
    "non-utf8": latin1,
}


# a release spelled as vLLM does not: 9.9.0 (pinned) and 9.9.1 (on the index)
FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
SPELLED = {
    "fullwidth-pinned": "9.9.0".translate(FULLWIDTH),
    "fullwidth": "9.9.1".translate(FULLWIDTH),
    "arabic-indic": "9.9.1".translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")),
    "leading-zero-pinned": "9.9.00",
    "leading-zero": "09.9.1",
    "newline": "9.9.1\n",
}
# every command that takes a release (exit 2, one line, nothing looked up)
TAKE_A_RELEASE: dict[str, Callable[..., list[str]]] = {
    "fetch": lambda b, v: ["fetch", v, "--dest", dest(b)],
    "apply": lambda b, v: ["apply", v, "--dest", dest(b)],
    "series": lambda b, v: ["series", v, "--out", dest(b)],
    "matrix": lambda b, v: ["matrix", "--versions", v],
    "port": lambda b, v: ["port", "9.9.0", v, "--work", dest(b)],
    "pr": lambda b, v: ["pr", "--onto", v, "--signoff", "A <a@b.c>"],
    "doctor": lambda b, v: ["doctor", "--target", "owner/t", "--drafter", "owner/d", "--vllm", v],
}


@dataclass
class Case:
    id: str
    argv: Callable[[Box], list[str]]
    code: int
    setup: Callable[[Box], object] = lambda b: None
    index: str = "good"
    how: str = "inproc"
    fault: Callable[[Box], tuple] | None = None
    env: Callable[[Box], dict[str, str]] = lambda b: {}


def dest(b: Box) -> str:
    return str(b.dir / "dest")


def tree(b: Box) -> Path:
    return b.dir / "tree"


def missing_in_series(b: Box) -> None:
    """patches.toml gives the release a variant whose file is not there."""
    with (b.root / "patches" / "patches.toml").open("a") as f:
        f.write('\n["not-there"]\nreleases = ["9.9.0"]\n')


def garbage_head(b: Box) -> None:
    (b.tree() / ".git" / "HEAD").write_text("garbage\n")


def damaged(b: Box) -> None:
    b.damage_object(b.tree())


def file_at(name: str) -> Callable[[Box], None]:
    def make(b: Box) -> None:
        (b.dir / name).write_text("a file, not a folder\n")

    return make


def escaping_member(b: Box) -> None:
    import io

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name in ("vllm-9.9.0/vllm/ok.py", "vllm-9.9.0/../../evil.py"):
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"x=1"))
    b.pin("sdist", S.SDIST, raw.getvalue())


def escaping_patch(d: bytes) -> bytes:
    return d.replace(b"a/vllm/model.py", b"a/../evil.py").replace(
        b"b/vllm/model.py", b"b/../evil.py"
    )


def no_nvcc(b: Box) -> dict[str, str]:
    """PATH with git alone: no nvcc anywhere, CUDA_HOME nowhere."""
    bin_ = b.dir / "bin"
    bin_.mkdir(exist_ok=True)
    (bin_ / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    return {"PATH": str(bin_), "CUDA_HOME": str(b.dir / "no-cuda")}


def bad_lock(b: Box) -> None:
    (b.root / "VERSIONS.lock").write_bytes(b"\xff\xfe[releases\n")


def my_commit(b: Box) -> None:
    """A commit of the user's on top of the series (unapply once dropped it)."""
    t = b.tree()
    (t / "MYWORK.txt").write_text("my precious work\n")
    S.git(t, "add", "MYWORK.txt")
    S.git(t, "commit", "-qm", "my precious work")


def users_folder(b: Box) -> None:
    """A folder of the user's: notes, an old patch, a series (export
    --into once deleted the patch and overwrote the series)."""
    d = b.dir / "dest"
    d.mkdir()
    (d / "notes.txt").write_text("mine\n")
    (d / "0009-old.patch").write_text("old\n")
    (d / "series").write_text("0009-old.patch\n")


def no_git(b: Box) -> dict[str, str]:
    """PATH without git (python runs by its full path)."""
    bin_ = b.dir / "bin-without-git"
    bin_.mkdir(exist_ok=True)
    return {"PATH": str(bin_)}


# every command that runs git, and what it needs before it does
NEEDS_GIT: dict[str, tuple[Callable[[Box], list[str]], Callable[[Box], object]]] = {
    "fetch-source-git": (
        lambda b: ["fetch", "--source", "git", "--remote", str(b.dir), "--dest", dest(b)],
        lambda b: None,
    ),
    "apply": (lambda b: ["apply", "--dest", dest(b)], lambda b: b.seed(S.SDIST)),
    "apply-on-a-tree": (lambda b: ["apply", "--dest", str(tree(b))], lambda b: b.tree()),
    "status": (lambda b: ["status", str(tree(b))], lambda b: b.tree()),
    "unapply": (lambda b: ["unapply", str(tree(b))], lambda b: b.tree()),
    "export": (lambda b: ["export", str(tree(b)), "--into", dest(b)], lambda b: b.tree()),
    "matrix": (lambda b: ["matrix", "--jobs", "1"], lambda b: b.seed(S.SDIST)),
    "port": (lambda b: ["port", "9.9.0", "9.9.0", "--work", dest(b)], lambda b: b.seed(S.SDIST)),
    "pr": (lambda b: ["pr", "--onto", str(tree(b)), "--signoff", "A <a@b.c>"], lambda b: b.tree()),
    "lint": (lambda b: ["lint"], lambda b: b.seed(S.SDIST)),
    "wheel": (lambda b: ["wheel", "--out", dest(b)], lambda b: b.seed(S.WHEEL)),
}


CASES = [
    # fetch
    Case(
        "fetch-unreachable-index",
        lambda b: ["fetch", "--dest", dest(b)],
        3,
        index="closed",
        how="sub",
    ),
    Case("fetch-index-html", lambda b: ["fetch", "--dest", dest(b)], 3, index="html"),
    Case("fetch-index-broken-json", lambda b: ["fetch", "--dest", dest(b)], 3, index="broken"),
    Case("fetch-not-gzip", lambda b: ["fetch", "--dest", dest(b)], 4, not_gzip, how="sub"),
    Case(
        "fetch-damaged-cache-offline",
        lambda b: ["fetch", "--dest", dest(b), "--offline"],
        4,
        lambda b: flip(b, S.SDIST),
    ),
    Case("fetch-dest-is-a-file", lambda b: ["fetch", "--dest", dest(b)], 6, file_at("dest")),
    Case(
        "fetch-dest-name-too-long",
        lambda b: ["fetch", "--dest", str(b.dir / ("x" * 300))],
        11,
        lambda b: b.seed(S.SDIST),
    ),
    Case(
        "fetch-disk-full",
        lambda b: ["fetch", "--dest", dest(b)],
        11,
        lambda b: b.seed(S.SDIST),
        fault=lambda b: (b.dir / "dest", errno.ENOSPC, 4),
    ),
    Case(
        "fetch-read-only",
        lambda b: ["fetch", "--dest", dest(b)],
        11,
        lambda b: b.seed(S.SDIST),
        fault=lambda b: (b.dir / "dest", errno.EROFS),
    ),
    Case("fetch-cache-read-only", lambda b: ["fetch"], 11, fault=lambda b: (b.cache, errno.EACCES)),
    Case("fetch-unknown-release", lambda b: ["fetch", "0.0.1"], 2),
    Case(
        "fetch-archive-member-escapes", lambda b: ["fetch", "--dest", dest(b)], 7, escaping_member
    ),
    Case(
        "fetch-lazy-wheel-without-record",
        lambda b: ["fetch", "--source", "wheel", "--dest", dest(b)],
        4,
        no_record_remote,
    ),
    # apply
    Case("apply-unreachable-index", lambda b: ["apply", "--dest", dest(b)], 3, index="closed"),
    Case("apply-not-gzip", lambda b: ["apply", "--dest", dest(b)], 4, not_gzip),
    Case(
        "apply-damaged-cache-offline",
        lambda b: ["apply", "--dest", dest(b), "--offline"],
        4,
        lambda b: flip(b, S.SDIST),
        how="sub",
    ),
    *[
        Case(
            f"{cmd}-series-{name}",
            lambda b, cmd=cmd, name=name: [
                cmd,
                *(["--dest", dest(b)] if cmd == "apply" else [str(tree(b))]),
                "--series",
                str(b.dir / name),
            ],
            2,
            lambda b, cmd=cmd: ((b.dir / "empty").mkdir(), cmd == "status" and b.tree()),
        )
        for cmd in ("apply", "status")
        for name in ("nonexistent", "empty")
    ],
    Case(
        "apply-series-names-a-missing-file",
        lambda b: ["apply", "--dest", dest(b)],
        5,
        missing_in_series,
    ),
    *[
        Case(
            f"apply-{k}-patch",
            lambda b: ["apply", "--dest", dest(b)],
            5,
            lambda b, e=e: (b.seed(S.SDIST), b.patch(e, 0)),
        )
        for k, e in PATCH_EDITS.items()
    ],
    Case(
        "apply-crlf-patch-on-a-tree",
        lambda b: ["apply", "--dest", str(b.tree(at_base=True))],
        5,
        lambda b: b.patch(crlf, 2),
    ),
    Case(
        "apply-dest-name-too-long",
        lambda b: ["apply", "--dest", str(b.dir / ("x" * 300))],
        11,
        lambda b: b.seed(S.SDIST),
    ),
    Case(
        "apply-patch-escapes-the-tree",
        lambda b: ["apply", "--dest", dest(b)],
        7,
        lambda b: b.patch(escaping_patch),
    ),
    Case("apply-dest-is-a-file", lambda b: ["apply", "--dest", dest(b)], 6, file_at("dest")),
    Case("apply-damaged-object", lambda b: ["apply", "--dest", str(tree(b))], 10, damaged),
    Case(
        "apply-garbage-head",
        lambda b: ["apply", "--dest", str(tree(b))],
        10,
        garbage_head,
        how="sub",
    ),
    Case(
        "apply-disk-full",
        lambda b: ["apply", "--dest", dest(b)],
        11,
        lambda b: b.seed(S.SDIST),
        fault=lambda b: (b.dir / "dest", errno.ENOSPC, 4),
    ),
    Case(
        "apply-read-only",
        lambda b: ["apply", "--dest", dest(b)],
        11,
        lambda b: b.seed(S.SDIST),
        fault=lambda b: (b.dir / "dest", errno.EROFS),
    ),
    Case(
        "apply-disk-full-on-a-tree",
        lambda b: ["apply", "--dest", str(tree(b))],
        11,
        lambda b: b.tree(at_base=True),
        fault=lambda b: (tree(b) / ".git", errno.ENOSPC),
    ),
    Case("apply-bad-option", lambda b: ["apply", "--no-such-option"], 2),
    # status, unapply
    Case("status-damaged-object", lambda b: ["status", str(tree(b))], 10, damaged),
    Case("status-garbage-head", lambda b: ["status", str(tree(b))], 10, garbage_head),
    Case(
        "status-series-names-a-missing-file",
        lambda b: ["status", str(tree(b))],
        5,
        lambda b: (b.tree(), missing_in_series(b)),
    ),
    Case("status-not-a-tree", lambda b: ["status", str(b.work)], 6),
    Case("status-a-file", lambda b: ["status", str(b.dir / "f")], 6, file_at("f")),
    Case("unapply-damaged-object", lambda b: ["unapply", str(tree(b))], 10, damaged, how="sub"),
    Case("unapply-garbage-head", lambda b: ["unapply", str(tree(b))], 10, garbage_head),
    # lock
    Case("lock-refresh-unreachable-index", lambda b: ["lock", "--refresh"], 3, index="closed"),
    Case("lock-refresh-index-html", lambda b: ["lock", "--refresh"], 3, index="html"),
    Case(
        "lock-refresh-index-broken-json",
        lambda b: ["lock", "--refresh"],
        3,
        index="broken",
        how="sub",
    ),
    Case("lock-not-toml", lambda b: ["lock"], 2, bad_lock),
    Case(
        "lock-refresh-read-only",
        lambda b: ["lock", "--refresh"],
        11,
        fault=lambda b: (b.root, errno.EROFS),
    ),
    # releases
    Case("releases-unreachable-index", lambda b: ["releases"], 3, index="closed"),
    Case("releases-index-html", lambda b: ["releases"], 3, index="html"),
    Case("releases-index-broken-json", lambda b: ["releases"], 3, index="broken", how="sub"),
    Case("releases-not-toml", lambda b: ["releases"], 2, bad_lock),
    # matrix
    Case(
        "matrix-unreachable-index", lambda b: ["matrix", "--versions", "9.9.1"], 3, index="closed"
    ),
    Case("matrix-not-gzip", lambda b: ["matrix", "--jobs", "1"], 4, not_gzip),
    Case(
        "matrix-garbled-patch", lambda b: ["matrix", "--jobs", "1"], 5, lambda b: b.patch(garbled)
    ),
    Case("matrix-not-a-version", lambda b: ["matrix", "--versions", "not/a/version"], 2),
    Case(
        "matrix-disk-full",
        lambda b: ["matrix", "--jobs", "1"],
        11,
        lambda b: b.seed(S.SDIST),
        fault=lambda b: (b.cache / "files", errno.ENOSPC),
    ),
    # port
    Case("port-unreachable-index", lambda b: ["port", "9.9.0", "9.9.1"], 3, index="closed"),
    Case("port-non-utf8-patch", lambda b: ["port", "9.9.0", "9.9.0"], 5, lambda b: b.patch(latin1)),
    Case(
        "port-work-is-a-file",
        lambda b: ["port", "9.9.0", "9.9.0", "--work", str(b.dir / "f")],
        6,
        file_at("f"),
    ),
    # export
    Case(
        "export-damaged-object", lambda b: ["export", str(tree(b)), "--into", dest(b)], 10, damaged
    ),
    Case(
        "export-garbage-head",
        lambda b: ["export", str(tree(b)), "--into", dest(b)],
        10,
        garbage_head,
    ),
    Case(
        "export-into-a-file",
        lambda b: ["export", str(tree(b)), "--into", dest(b)],
        11,
        lambda b: (b.tree(), file_at("dest")(b)),
    ),
    Case(
        "export-read-only",
        lambda b: ["export", str(tree(b)), "--into", dest(b)],
        11,
        lambda b: b.tree(),
        fault=lambda b: (b.dir / "dest", errno.EROFS),
    ),
    Case("export-not-a-tree", lambda b: ["export", str(b.work)], 6),
    # lint
    Case("lint-garbled-patch", lambda b: ["lint"], 5, lambda b: b.patch(garbled)),
    Case("lint-series-names-a-missing-file", lambda b: ["lint"], 5, missing_in_series),
    Case("lint-not-toml", lambda b: ["lint"], 2, bad_lock),
    # pr
    Case(
        "pr-unreachable-index",
        lambda b: ["pr", "--onto", "9.9.1", "--signoff", "A <a@b.c>"],
        3,
        index="closed",
    ),
    Case(
        "pr-onto-garbage-head",
        lambda b: ["pr", "--onto", str(tree(b)), "--signoff", "A <a@b.c>"],
        10,
        garbage_head,
    ),
    Case(
        "pr-onto-a-file",
        lambda b: ["pr", "--onto", str(b.dir / "f"), "--signoff", "A <a@b.c>"],
        2,
        file_at("f"),
    ),
    Case(
        "pr-results-not-the-tiers",
        lambda b: ["pr", "--onto", "9.9.1", "--signoff", "A <a@b.c>", "--results", f"{b.dir}/f"],
        2,
        file_at("f"),
    ),
    # RecursionError and MemoryError were once exit 70
    Case(
        "pr-results-nested-deep",
        lambda b: ["pr", "--onto", "9.9.1", "--signoff", "A <a@b.c>", "--results", f"{b.dir}/f"],
        2,
        lambda b: (b.dir / "f").write_text("[" * 100_000 + "]" * 100_000),
    ),
    Case(
        "pr-results-dev-zero",
        lambda b: ["pr", "--onto", "9.9.1", "--signoff", "A <a@b.c>", "--results", "/dev/zero"],
        2,
    ),
    Case(
        "pr-onto-damaged-object",
        lambda b: ["pr", "--onto", str(tree(b)), "--signoff", "A <a@b.c>"],
        10,
        damaged,
    ),
    # wheel
    Case("wheel-without-record", lambda b: ["wheel", "--out", dest(b)], 8, no_record, how="sub"),
    Case(
        "wheel-not-a-zip",
        lambda b: ["wheel", "--out", dest(b)],
        8,
        lambda b: b.pin("wheel", S.WHEEL, b"PK\x03\x04 not really a zip" * 10),
    ),
    Case("wheel-unreachable-index", lambda b: ["wheel", "--out", dest(b)], 3, index="closed"),
    Case(
        "wheel-damaged-cache-offline",
        lambda b: ["wheel", "--out", dest(b), "--offline"],
        4,
        lambda b: flip(b, S.WHEEL),
    ),
    Case(
        "wheel-garbled-patch",
        lambda b: ["wheel", "--out", dest(b)],
        5,
        lambda b: (b.seed(S.WHEEL), b.patch(garbled)),
    ),
    Case(
        "wheel-out-is-a-file",
        lambda b: ["wheel", "--out", dest(b)],
        11,
        lambda b: (b.seed(S.WHEEL), file_at("dest")(b)),
    ),
    Case(
        "wheel-read-only",
        lambda b: ["wheel", "--out", dest(b)],
        11,
        lambda b: b.seed(S.WHEEL),
        fault=lambda b: (b.dir / "dest", errno.EROFS),
    ),
    Case(
        "wheel-disk-full",
        lambda b: ["wheel", "--out", dest(b)],
        11,
        lambda b: b.seed(S.WHEEL),
        fault=lambda b: (b.dir / "dest", errno.ENOSPC, 1),
    ),
    Case(
        "wheel-source-without-nvcc",
        lambda b: ["wheel", "--mode", "source", "--out", dest(b)],
        9,
        lambda b: b.seed(S.SDIST),
        env=no_nvcc,
    ),
    # verify-wheel
    Case(
        "verify-wheel-garbage",
        lambda b: ["verify-wheel", str(b.dir / "x.whl")],
        8,
        lambda b: (b.dir / "x.whl").write_bytes(b"garbage" * 50),
    ),
    Case(
        "verify-wheel-without-record",
        lambda b: ["verify-wheel", str(b.downloads / NO_RECORD)],
        8,
        no_record,
    ),
    Case("verify-wheel-missing", lambda b: ["verify-wheel", str(b.dir / "none.whl")], 8),
    Case(
        "verify-wheel-bad-arch",
        lambda b: ["verify-wheel", str(b.downloads / S.WHEEL), "--arch", "sm_x"],
        2,
        lambda b: b.seed(S.WHEEL),
    ),
    Case(
        "verify-wheel-extension-not-elf",
        lambda b: ["verify-wheel", str(b.downloads / S.WHEEL), "--arch", "sm_100"],
        8,
        lambda b: b.seed(S.WHEEL),
        how="sub",
    ),
    Case(
        "verify-wheel-record-mismatch",
        lambda b: ["verify-wheel", str(b.dir / TAMPERED)],
        8,
        lambda b: shutil.copy(b.world.rel.www / TAMPERED, b.dir / TAMPERED),
    ),
    # doctor: a vLLM newer than its rules is refused, not guessed
    Case(
        "doctor-vllm-newer-than-vpatch-knows",
        lambda b: ["doctor", "--target", "owner/t", "--drafter", "owner/d", "--vllm", "99.0.0"],
        12,
        lambda b: copy_rules(b.root),
    ),
    # one release parser: another script's digits, leading zeros
    *[
        Case(f"{name}-spelled-{how}", (lambda a, v: lambda b: a(b, v))(argv, v), 2)
        for how, v in SPELLED.items()
        for name, argv in TAKE_A_RELEASE.items()
    ],
    # nothing a user owns is lost
    Case("unapply-a-commit-of-yours", lambda b: ["unapply", str(tree(b))], 6, my_commit),
    Case(
        "export-into-a-folder-of-yours",
        lambda b: ["export", str(tree(b)), "--into", dest(b)],
        6,
        lambda b: (b.tree(), users_folder(b)),
    ),
    Case(
        "series-into-a-series-of-yours",
        lambda b: ["series", "--out", dest(b)],
        6,
        lambda b: (users_folder(b), (b.dir / "dest" / "notes.txt").unlink()),
    ),
    Case(
        "apply-dest-a-folder-of-yours",
        lambda b: ["apply", "--dest", dest(b)],
        6,
        lambda b: (b.seed(S.SDIST), users_folder(b)),
    ),
    # no git on PATH is said in one line, by every command that runs it
    *[
        Case(f"{name}-without-git", argv, 9, setup, how="sub", env=no_git)
        for name, (argv, setup) in NEEDS_GIT.items()
    ],
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile(case: Case, box: Box, monkeypatch, capsys) -> None:
    if case.id.startswith("lint-"):  # lint validates doctor's rules as every data command
        copy_rules(box.root)
    case.setup(box)
    box.index, box.env = case.index, case.env(box)
    argv = case.argv(box)
    before = S.snapshot(box.dir, skip=("cache",))
    kw = {"fault": case.fault(box)} if case.fault else {}
    code, err = run(box, argv, monkeypatch, capsys, case.how, **kw)
    check(box, code, err, case.code, before)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_destination(box, monkeypatch, capsys) -> None:
    box.seed(S.SDIST)
    d = box.dir / "dest"
    d.mkdir()
    d.chmod(0o555)
    before = S.snapshot(box.dir, skip=("cache",))
    try:
        code, err = run(box, ["apply", "--dest", str(d)], monkeypatch, capsys, "sub")
    finally:
        d.chmod(0o755)
    check(box, code, err, 11, before)


# -- Ctrl-C --------------------------------------------------------------------------------


def test_interrupted_apply_rolls_back(box, monkeypatch, capsys) -> None:
    t = box.tree(at_base=True)
    before = S.snapshot(box.dir, skip=("cache",))
    real, calls = gitutil.am, []
    from vpatch.gitutil import repo as gitrepo  # where am_each finds am

    def am(repo, patch, date):
        calls.append(patch)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(repo, patch, date)

    monkeypatch.setattr(gitrepo, "am", am)
    code, err = run(box, ["apply", "--dest", str(t)], monkeypatch, capsys)
    check(box, code, err, 130, before)
    assert len(calls) == 2 and "interrupted" in err
    assert not (t / ".git" / "vpatch-applying").exists()


def test_interrupted_fetch_removes_what_it_wrote(box, monkeypatch, capsys) -> None:
    box.seed(S.SDIST)
    real, calls = tarfile.TarFile.extract, []

    def extract(self, member, path="", **kw):
        calls.append(member)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, member, path, **kw)

    monkeypatch.setattr(tarfile.TarFile, "extract", extract)
    for made in (False, True):  # a new destination, and an empty one given
        if made:
            (box.dir / "dest").mkdir()
        before = S.snapshot(box.dir, skip=("cache",))
        calls.clear()
        code, err = run(box, ["fetch", "--dest", dest(box)], monkeypatch, capsys)
        check(box, code, err, 130, before)
        assert len(calls) == 3


# -- what a hostile pass found, one test each ---------------------------------------------


def test_commands_that_need_no_git_work_without_it(box) -> None:
    """lock, series, --version, verify-wheel (no --tree) and --help answer
    the same with and without git on PATH."""
    box.seed(S.WHEEL)
    env = {**os.environ, **env_of(box)}
    runs = [
        ["lock"],
        ["series", "--out", str(box.dir / "s")],
        ["--version"],
        ["verify-wheel", str(box.downloads / S.WHEEL)],
        ["doctor", "--help"],
    ]
    for argv in runs:
        shutil.rmtree(box.dir / "s", ignore_errors=True)
        with_git = vpatch(*argv, env=env, cwd=box.work)
        shutil.rmtree(box.dir / "s", ignore_errors=True)
        without = vpatch(*argv, env={**env, **no_git(box)}, cwd=box.work)
        assert (without.returncode, without.stdout) == (with_git.returncode, with_git.stdout)
        assert "git" not in without.stderr, without.stderr


@pytest.mark.parametrize("argv", [["lock"], ["--help"], ["series", "--out", "s"], ["-V"]])
def test_stdout_closed_early_is_silent(box, argv) -> None:
    """`vpatch lock | head -1` said `vpatch: error: Broken pipe`, exit 11:
    now nothing is said, and the exit status is 128 + SIGPIPE (--help is
    argparse's, which ignores a failed write: 0)."""
    import subprocess

    r, w = os.pipe()
    os.close(r)  # the reader is gone before vpatch writes
    try:
        p = subprocess.run(
            [*command(), *argv],
            stdout=w,
            stderr=subprocess.PIPE,
            env=environment(env_of(box)),
            cwd=box.work,
            text=True,
        )
    finally:
        os.close(w)
    want = 0 if argv == ["--help"] else cli.BROKEN_PIPE
    assert (p.returncode, p.stderr) == (want, "")


def test_an_over_long_argument_is_cut_in_the_message(box, monkeypatch, capsys) -> None:
    blob = "x" * 10_000
    for argv in (["apply", blob], ["matrix", "--format", blob], ["status", blob]):
        code, err = run(box, argv, monkeypatch, capsys)
        line = err.strip().splitlines()[-1]
        assert code in (2, 6) and line.startswith("vpatch: error: ") and len(line) < 600, line
        assert "characters)" in line


def test_apply_names_the_first_stray_and_writes_nothing(box, monkeypatch, capsys) -> None:
    """`apply --dest /` extracted the release into a temporary folder (72 MB
    left behind when killed) and hashed every file under / before it
    compared; a folder holding one note.txt was refused for `.buildkite is
    missing`. Now names come first: the stray is named, and no file of the
    folder is read."""
    from vpatch.sources import listing

    box.seed(S.SDIST)
    d = box.dir / "dest"
    (d / "deep" / "deeper").mkdir(parents=True)
    (d / "note.txt").write_text("mine\n")
    for i in range(50):
        (d / "deep" / "deeper" / f"{i}.bin").write_bytes(b"x" * 1000)
    read, real = [], listing.entry
    monkeypatch.setattr(listing, "entry", lambda p, digest=True: read.append(p) or real(p, digest))
    listed, walk = [], os.walk

    def walking(top, *a, **kw):
        for step in walk(top, *a, **kw):
            listed.append(step[0])
            yield step

    monkeypatch.setattr(os, "walk", walking)
    before = S.snapshot(box.dir, skip=("cache",))
    listed.clear()
    code, err = run(box, ["apply", "--dest", str(d)], monkeypatch, capsys)
    walked = [f for f in listed if f.startswith(str(d))]
    check(box, code, err, 6, before)  # and nothing left in TMPDIR
    assert "(deep is not in the release)" in err
    assert read == [] and walked == [str(d)]  # no file hashed, no folder below it listed
    (d / "deep" / "deeper").rename(d / "vllm")  # now a stray inside a release folder
    shutil.rmtree(d / "deep")
    code, err = run(box, ["apply", "--dest", str(d)], monkeypatch, capsys)
    assert code == 6 and "(note.txt is not in the release)" in err


def test_an_interpreter_that_hangs_is_said_to_be_awaited(box, monkeypatch, capsys) -> None:
    """`vpatch check --python X`, X a script that sleeps: 120 s of silence.
    Now a line says what is awaited, and VPATCH_PYTHON_TIMEOUT sets the limit."""
    from vpatch.env import dist

    py = box.dir / "python-that-sleeps"
    py.write_text("#!/bin/sh\nexec sleep 600\n")
    py.chmod(0o755)
    monkeypatch.setattr(dist, "NOTICE", 0.2)
    box.env = {"VPATCH_PYTHON_TIMEOUT": "1"}
    before = S.snapshot(box.dir, skip=("cache",))
    for name in ("check", "install", "uninstall"):
        code, err = run(box, [name, "--python", str(py)], monkeypatch, capsys)
        check(box, code, err, 2, before)
        assert err.splitlines()[0].startswith(f"waiting for {py} to say where its vLLM is")
        assert "did not answer within 1s" in err.splitlines()[-1]


def test_the_makefile_hands_every_variable_as_one_word(tmp_path) -> None:
    """`make apply VLLM='X.Y.Z; echo INJECTED'` ran the echo. Every recipe
    line, with every variable set to a value that would end the command,
    still gives that value as one word (make -n prints what it would run);
    and a real run hands it to vpatch as it is."""
    import shlex
    import subprocess

    root = Path(__file__).resolve().parents[2]
    poison = "9.9.1'; echo INJECTED; '"
    text = (root / "Makefile").read_text()
    targets = text.split(".PHONY:", 1)[1].split("\n\n", 1)[0].replace("\\\n", " ").split()
    assert "apply" in targets and "clean" in targets
    for var in ("VLLM", "PYTHON", "CRASH_RUNS"):  # the ones made for the caller to set
        for target in targets:
            r = subprocess.run(
                ["make", "-n", "-C", str(root), target, f"{var}={poison}"],
                capture_output=True,
                text=True,
            )
            assert r.returncode == 0, r.stderr
            for line in r.stdout.splitlines():
                if "INJECTED" in line and not line.startswith("make"):
                    words = shlex.split(line)
                    assert all(poison in w for w in words if "INJECTED" in w), (var, line)
    stub = tmp_path / "vpatch"
    stub.write_text('#!/bin/sh\nfor a in "$@"; do echo "<$a>"; done\n')
    stub.chmod(0o755)
    r = subprocess.run(
        ["make", "-s", "-C", str(root), "-o", ".venv/bin/.installed", "apply"]
        + [f"VLLM={poison}", f"VPATCH={stub}"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["<apply>", f"<{poison}>"]


def test_every_code_the_corpus_shows_is_in_the_commands_help() -> None:
    """Each subcommand's --help lists its exit codes: at least those its
    hostile cases end with."""
    ap = cli.parser()
    names = sorted(ap.commands, key=len, reverse=True)  # type: ignore[attr-defined]
    for c in CASES:
        name = next(n for n in names if c.id.startswith(f"{n}-"))  # a case is named so
        helped = ap.commands[name].format_help()  # type: ignore[attr-defined]
        assert f"\n  {c.code:<4} " in helped, (c.id, name)


def test_the_corpus_covers_every_exit_code() -> None:
    from vpatch import errors

    codes = {
        c.exit_code
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, errors.VpatchError)
    }
    covered = {c.code for c in CASES} | {130}
    assert codes - {1} <= covered  # 1: the base class, never raised itself
    doc = (Path(__file__).parents[2] / "docs" / "install.md").read_text()
    for c in sorted(covered):
        assert f"| {c} |" in doc, f"exit code {c} is not in docs/install.md's table"
