"""Crash consistency: `vpatch fetch --dest`, `apply` and `wheel` are killed
(SIGKILL to the run's process group: vpatch and the git it runs) at seeded
random points, then run again without a kill. Every re-run must succeed and
end in the same bytes as an uninterrupted run: the tree's files and commit
ids, the cached download, the wheel; the cache may hold only complete,
verified files (no killed run's partial download is ever used or left).

The release is synthetic and served by a stand-in index; whether a run
starts with an empty cache (so a kill can land mid-download) is seeded too.
The kill comes after a delay drawn from [0, the uninterrupted run's
duration], counted from the moment the command starts (the interpreter
and imports are ready before: a process is prepared while the previous
one is checked).

CRASH_RUNS (default 20) runs per command, CRASH_SEED (default 0);
`make crash` runs 200 per command.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import synthetic as S
from vpatch import cli
from vpatch.sources import index

RUNS = int(os.environ.get("CRASH_RUNS", "20"))
SEED = int(os.environ.get("CRASH_SEED", "0"))

# imports first, then wait for "go": the kill delay counts from the command's start
# (and "done" when the command returns: its duration leaves the interpreter's exit out)
DRIVER = (
    "import sys; from vpatch import cli; print('ready', flush=True); sys.stdin.readline(); "
    "code = cli.main(sys.argv[1:]); print('done', flush=True); sys.exit(code)"
)


@dataclass
class Env:
    rel: S.Release
    url: str
    base: Path

    def vars(self, cache: Path) -> dict[str, str]:
        return {
            "VPATCH_ROOT": str(self.rel.root),
            "VPATCH_CACHE": str(cache),
            "PIP_INDEX_URL": self.url,
        }


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("crash")
    rel = S.make_release(base / "release", bulk=100, so_size=4 << 20)
    with S.serve(rel.www) as idx:
        yield Env(rel, idx.url, base)


class Runner:
    """Driver processes: the next one is prepared (imports under way) while
    the last one is checked."""

    def __init__(self, env: Env):
        self.env = env

    def prepare(self, argv: list[str], cache: Path) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", DRIVER, *argv],
            env={**os.environ, **self.env.vars(cache)},
            cwd=self.env.base,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # its own process group: the kill reaches git too
        )

    def start(self, p: subprocess.Popen) -> float:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
        return time.monotonic()

    def timed(self, argv: list[str], cache: Path) -> float:
        p = self.prepare(argv, cache)
        t0 = self.start(p)
        assert p.stdout is not None
        while p.stdout.readline().strip() != "done":
            pass
        took = time.monotonic() - t0
        assert p.wait() == 0
        self.close(p)
        return took

    def kill_after(self, p: subprocess.Popen, delay: float) -> int:
        t0 = self.start(p)
        try:
            p.wait(max(0.0, delay - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
        rc = p.wait()
        self.close(p)
        _gone(p.pid)
        return rc

    @staticmethod
    def close(p: subprocess.Popen) -> None:
        for f in (p.stdin, p.stdout):
            if f is not None:
                f.close()


def _gone(group: int) -> None:
    """Wait until no process of the killed group is alive (zombies aside):
    a child caught between fork and exec still holds the run's flock."""
    for _ in range(500):
        alive = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group and fields[0] != "Z":
                alive.append(stat)
        if not alive:
            return
        time.sleep(0.01)
    raise AssertionError(f"processes of the killed run {group} are still alive")


def rerun(env: Env, argv: list[str], cache: Path, monkeypatch) -> int:
    """The run again, without a kill, in this process."""
    for k, v in env.vars(cache).items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(env.base)
    index.index_url.cache_clear()
    index.project.cache_clear()
    try:
        return cli.main(argv)
    finally:
        index.index_url.cache_clear()
        index.project.cache_clear()


def files_of(d: Path) -> dict[str, tuple]:
    return S.snapshot(d, skip=(".git",))


def cache_ok(cache: Path, names: set[str], env: Env) -> None:
    """Only complete, verified downloads: the artifacts with their bytes."""
    d = cache / "downloads"
    assert {p.name for p in d.iterdir()} == names
    for n in names:
        assert (d / n).read_bytes() == (env.rel.www / n).read_bytes()


@dataclass
class Command:
    name: str
    argv: Callable[[Path], list[str]]  # for a destination
    artifact: str
    result: Callable[[Path], object]  # what must equal the uninterrupted run's
    rerun_ok: Callable[[Path], bool] = lambda d: True  # whether the re-run may refuse


def tree_state(d: Path) -> object:
    heads = S.git(d, "rev-parse", "HEAD", "vpatch/base-9.9.0^{commit}")
    assert S.git(d, "status", "--porcelain") == ""
    assert not (d / ".git" / "vpatch-applying").exists() and not (d / ".vpatch-partial").exists()
    return heads, files_of(d)


def fetched(d: Path) -> bool:
    """A fetch --dest that completed before the kill (no marker, files in
    place) leaves nothing to redo: its re-run would refuse the full folder."""
    return d.is_dir() and any(d.iterdir()) and not (d / ".vpatch-partial").exists()


COMMANDS = {
    "fetch": Command(
        "fetch",
        lambda d: ["fetch", "--dest", str(d)],
        S.SDIST,
        files_of,
        rerun_ok=lambda d: not fetched(d),
    ),
    "apply": Command("apply", lambda d: ["apply", "--dest", str(d)], S.SDIST, tree_state),
    "wheel": Command("wheel", lambda d: ["wheel", "--out", str(d)], S.WHEEL, files_of),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_killed_runs_recover(name, env, tmp_path, monkeypatch) -> None:
    cmd = COMMANDS[name]
    runner = Runner(env)
    ref_cache, ref = tmp_path / "ref-cache", tmp_path / "ref"
    cold = runner.timed(cmd.argv(ref), ref_cache)  # downloads first
    want = cmd.result(ref)
    shutil.rmtree(ref)
    warm = runner.timed(cmd.argv(ref), ref_cache)
    assert cmd.result(ref) == want
    rng = random.Random(f"{SEED}-{name}")
    cache = tmp_path / "cache"
    outcomes = {"re-run after the kill": 0, "finished before the kill": 0}
    t0 = time.monotonic()
    # The kill points are drawn within the uninterrupted run's time, measured
    # once. On a busy machine a run may take much less time than that
    # measurement; each run that finished before its kill shrinks the window,
    # so that most kills still land mid-run.
    scale = 1.0
    ready = runner.prepare(cmd.argv(tmp_path / "run-0"), cache)
    for i in range(RUNS):
        empty = rng.random() < 0.5
        if empty:
            shutil.rmtree(cache, ignore_errors=True)  # a kill may land mid-download
        dest = tmp_path / f"run-{i}"
        rc = runner.kill_after(ready, scale * rng.uniform(0, cold if empty else warm))
        if i + 1 < RUNS:
            ready = runner.prepare(cmd.argv(tmp_path / f"run-{i + 1}"), cache)
        assert rc in (0, -signal.SIGKILL)
        if rc < 0 and cmd.rerun_ok(dest):
            assert rerun(env, cmd.argv(dest), cache, monkeypatch) == 0, f"run {i}"
            outcomes["re-run after the kill"] += 1
        else:
            outcomes["finished before the kill"] += 1
            scale *= 0.7
        assert cmd.result(dest) == want, f"run {i}"
        cache_ok(cache, {cmd.artifact}, env)
        shutil.rmtree(dest)
    took = time.monotonic() - t0
    print(
        f"\n{name}: {RUNS} runs in {took:.1f} s, {outcomes}; "
        f"uninterrupted {cold:.2f} s (empty cache), {warm:.2f} s (warm)"
    )
    assert outcomes["re-run after the kill"] >= RUNS // 2  # most kills land mid-run


# -- the notes a killed run leaves, one by one ----------------------------------------------


@pytest.fixture
def ref(env, tmp_path_factory, monkeypatch) -> dict[str, Path]:
    """Uninterrupted fetch and apply results, made once per test."""
    base = tmp_path_factory.mktemp("ref")
    cache = base / "cache"
    out = {"fetch": base / "fetch", "apply": base / "apply"}
    assert rerun(env, ["fetch", "--dest", str(out["fetch"])], cache, monkeypatch) == 0
    assert rerun(env, ["apply", "--dest", str(out["apply"])], cache, monkeypatch) == 0
    return out


@pytest.mark.parametrize("name", ["fetch", "apply"])
def test_a_half_made_folder_of_ours_is_started_over(name, env, ref, tmp_path, monkeypatch):
    dest = tmp_path / "dest"
    (dest / "vllm").mkdir(parents=True)
    (dest / "vllm" / "half.py").write_text("half written")
    (dest / ".vpatch-partial").write_bytes(b"")
    assert rerun(env, COMMANDS[name].argv(dest), tmp_path / "cache", monkeypatch) == 0
    assert COMMANDS[name].result(dest) == COMMANDS[name].result(ref[name])


@pytest.mark.parametrize("name", ["fetch", "apply"])
def test_a_folder_with_foreign_content_is_refused(name, env, tmp_path, monkeypatch, capsys):
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    before = S.snapshot(dest)
    assert rerun(env, COMMANDS[name].argv(dest), tmp_path / "cache", monkeypatch) == 6
    assert "not" in capsys.readouterr().err and S.snapshot(dest) == before


def _stuck_am(tree: Path, patch: Path) -> None:
    """A `git am` that stopped on a patch that does not apply: rebase-apply/
    stays, as after a conflict (or a kill)."""
    r = subprocess.run(
        ["git", "am", "--keep-cr", str(patch)],
        cwd=tree,
        capture_output=True,
        env={**os.environ, **S.GIT_ENV},
    )
    assert r.returncode != 0 and (tree / ".git" / "rebase-apply").is_dir()


def test_the_journal_resets_a_killed_series(env, ref, tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    shutil.copytree(ref["apply"], tree, symlinks=True)
    S.git(tree, "reset", "-q", "--hard", "vpatch/base-9.9.0")
    base = S.git(tree, "rev-parse", "HEAD").strip()
    patches = sorted(env.rel.series.glob("*.patch"))
    S.git(tree, "am", "--keep-cr", str(patches[0]))  # one patch in, with other ids than ours
    _stuck_am(tree, patches[0])  # the first again: it does not apply twice
    (tree / ".git" / "index.lock").write_bytes(b"")  # what a killed git leaves
    (tree / ".git" / "vpatch-applying").write_text(base + "\n")
    assert rerun(env, ["apply", "--dest", str(tree)], tmp_path / "cache", monkeypatch) == 0
    assert tree_state(tree) == tree_state(ref["apply"])


def test_a_persons_git_am_is_refused(env, ref, tmp_path, monkeypatch, capsys):
    tree = tmp_path / "tree"
    shutil.copytree(ref["apply"], tree, symlinks=True)
    S.git(tree, "reset", "-q", "--hard", "vpatch/base-9.9.0")
    first = sorted(env.rel.series.glob("*.patch"))[0]
    bad = tmp_path / first.name
    bad.write_bytes(first.read_bytes().replace(b"\n line 4\n", b"\n line 4, not here\n"))
    _stuck_am(tree, bad)
    before = S.snapshot(tree)
    assert rerun(env, ["apply", "--dest", str(tree)], tmp_path / "cache", monkeypatch) == 6
    assert "git am is still in progress" in capsys.readouterr().err
    assert S.same(before, S.snapshot(tree)) == []


def test_temporary_files_of_gone_processes_are_removed(tmp_path):
    from vpatch.paths import sweep

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    names = [
        f".x.whl.{gone.pid}.part",
        f".x.whl.{os.getpid()}.part",
        f".y.{gone.pid}.tmp",
        "x.whl",
        f".x.whl.{gone.pid}.other",
    ]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    assert sorted(p.name for p in sweep(tmp_path)) == sorted([names[0], names[2]])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[1:2] + names[3:])


# -- a folder compared with the release, killed ----------------------------------------------


def test_a_killed_comparison_of_a_folder_leaves_nothing_behind(env, ref, tmp_path, monkeypatch):
    """`apply --dest` of a folder `fetch --dest` filled (made a tree in
    place) and of a folder with a stray file (refused), killed at seeded
    random points, the release's listing cached or not: killed, it left a
    72 MB vpatch-adopt-* folder in TMPDIR. Now nothing is left in TMPDIR or
    beside the folder, a refused folder is as it was, a cached listing is
    whole, and the fetched folder's re-run gives the tree an uninterrupted
    apply gives."""
    import json

    from vpatch.paths import _TEMP

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    runner = Runner(env)
    cache, work = tmp_path / "cache", tmp_path / "work"
    files = cache / "files"
    work.mkdir()

    def folder(kind: str, name: str) -> Path:
        dest = work / name
        shutil.copytree(ref["fetch"], dest, symlinks=True)
        if kind == "stray":
            (dest / "vllm" / "notes.txt").write_text("mine\n")
        return dest

    rng = random.Random(f"{SEED}-compare")
    want = tree_state(ref["apply"])
    killed = 0
    for kind, code in (("fetched", 0), ("stray", 6)):
        probe = folder(kind, "probe")
        shutil.rmtree(files, ignore_errors=True)
        p = runner.prepare(["apply", "--dest", str(probe)], cache)
        t0 = runner.start(p)
        assert p.wait() == code
        cold = time.monotonic() - t0  # the listing read from the archive: the longest run
        runner.close(p)
        shutil.rmtree(probe)
        for i in range(max(RUNS // 2, 4)):
            if rng.random() < 0.5:
                shutil.rmtree(files, ignore_errors=True)  # the listing is read anew
            dest = folder(kind, f"{kind}-{i}")
            before = S.snapshot(dest)
            argv = ["apply", "--dest", str(dest)]
            rc = runner.kill_after(runner.prepare(argv, cache), rng.uniform(0, cold))
            assert rc in (code, -signal.SIGKILL)
            killed += rc < 0
            assert list(tmp.iterdir()) == [] and [p.name for p in work.iterdir()] == [dest.name]
            for kept in files.glob("*/entries.json"):
                assert isinstance(json.loads(kept.read_text()), dict)  # whole, or not there
            if kind == "stray":
                assert S.snapshot(dest) == before
            else:
                if rc < 0:
                    assert rerun(env, argv, cache, monkeypatch) == 0
                assert tree_state(dest) == want, f"run {i}"
            shutil.rmtree(dest)
    assert killed >= 2  # kills landed mid-run
    # a killed run's temporary listing is swept by the next run that writes one
    for kept in files.glob("*/entries.json"):
        kept.unlink()
    dest = folder("stray", "last")
    assert rerun(env, ["apply", "--dest", str(dest)], cache, monkeypatch) == 6
    assert [p for p in files.rglob("*") if _TEMP.match(p.name)] == []
