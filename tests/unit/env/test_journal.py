"""env.journal: all-or-nothing file replacement, killed at every step."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from vpatch.env import journal
from vpatch.errors import TreeError

MTIME = 1_600_000_000_123_456_789

# One transaction on a small tree, as a child process (so it can be killed).
SCRIPT = """
import sys
from pathlib import Path
from vpatch.env import journal
root = Path(sys.argv[1])
with journal.Transaction(root / "x.dist-info", "test") as t:
    t.put(root / "a.txt", b"A2")
    t.delete(root / "b.txt")
    t.put(root / "new/deep/c.txt", b"C", 0o600)
    t.put(root / "d.txt", b"D2", None, 1_700_000_000_000_000_000)
    staged = t.reserve(root / "e.txt")
    staged.write_bytes(b"E2")
    t.delete(root / "old/f.txt")
    t.commit(prune=[root / "old"])
"""


def make_tree(root: Path) -> None:
    (root / "x.dist-info").mkdir(parents=True)
    for name, data, mode in [
        ("a.txt", b"A1", 0o640),
        ("b.txt", b"B", 0o644),
        ("d.txt", b"D1", 0o644),
        ("e.txt", b"E1", 0o755),
        ("old/f.txt", b"F", 0o644),
    ]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
        (root / name).chmod(mode)
        os.utime(root / name, ns=(MTIME, MTIME))


def state(root: Path, mtimes: bool = True) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_dir():
            out[rel + "/"] = None
        else:
            st = p.stat()
            out[rel] = (p.read_bytes(), st.st_mode & 0o7777, st.st_mtime_ns if mtimes else 0)
    return out


def run(root: Path, kill_at: int | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if kill_at is not None:
        env["VPATCH_TEST_KILL_AT"] = str(kill_at)
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, root], env=env, capture_output=True, text=True
    )


@pytest.fixture
def tree(tmp_path) -> Path:
    make_tree(tmp_path / "t")
    return tmp_path / "t"


def test_commit(tree):
    before = state(tree)
    r = run(tree, 0)
    assert r.returncode == 0, r.stderr
    after = state(tree, mtimes=False)
    assert after["a.txt"] == (b"A2", 0o640, 0)  # the old mode is kept
    assert after["e.txt"] == (b"E2", 0o755, 0)
    assert after["new/deep/c.txt"] == (b"C", 0o600, 0)
    assert "b.txt" not in after and "old/" not in after  # pruned once empty
    assert (tree / "d.txt").stat().st_mtime_ns == 1_700_000_000_000_000_000
    assert not (tree / "x.dist-info" / journal.FOLDER).exists()
    assert journal.recover(tree / "x.dist-info") is None
    assert before != state(tree)


def test_killed_at_every_step_then_recovered(tmp_path):
    make_tree(tmp_path / "count")
    r = run(tmp_path / "count", 0)
    steps = int(r.stderr.split("vpatch-test-steps ")[1])
    make_tree(tmp_path / "done")
    assert run(tmp_path / "done").returncode == 0
    after = state(tmp_path / "done", mtimes=False)
    assert steps > 15
    seen = set()
    for k in range(1, steps + 1):
        root = tmp_path / f"k{k}"
        make_tree(root)
        before = state(root)
        r = run(root, k)
        assert r.returncode == -signal.SIGKILL, (k, r.stderr)
        what = journal.recover(root / "x.dist-info")
        now = state(root)
        if now == before:
            seen.add("rolled back" if what and "rolled back" in what else "untouched")
        else:  # killed after the journal was done with: the new state, complete
            assert state(root, mtimes=False) == after, k
            seen.add("done")
        assert not (root / "x.dist-info" / journal.FOLDER).exists()
    assert seen == {"untouched", "rolled back", "done"}


def test_a_kill_during_recovery_is_recovered_next_time(tmp_path):
    make_tree(tmp_path / "count")
    steps = int(run(tmp_path / "count", 0).stderr.split("vpatch-test-steps ")[1])
    recover = (
        "import sys; from pathlib import Path; from vpatch.env import journal; "
        "journal.recover(Path(sys.argv[1]))"
    )
    killed = 0
    for k in range(steps - 10, steps - 1):  # kills while replacing: the journal is there
        root = tmp_path / f"k{k}"
        make_tree(root)
        before = state(root)
        assert run(root, k).returncode == -signal.SIGKILL
        if not (root / "x.dist-info" / journal.FOLDER / journal.STATE).exists():
            continue  # killed while staging
        env = {**os.environ, "VPATCH_TEST_KILL_AT": "2"}
        r = subprocess.run([sys.executable, "-c", recover, root / "x.dist-info"], env=env)
        killed += r.returncode == -signal.SIGKILL
        assert "rolled back" in journal.recover(root / "x.dist-info")
        assert state(root) == before
    assert killed >= 5


def test_recovery_refuses_a_file_changed_under_the_journal(tree):
    r = run(tree, 16)
    assert r.returncode == -signal.SIGKILL
    assert (tree / "x.dist-info" / journal.FOLDER / journal.STATE).exists()
    (tree / "a.txt").write_bytes(b"somebody else")
    snap = state(tree)
    with pytest.raises(TreeError, match="a.txt changed since an interrupted vpatch test"):
        journal.recover(tree / "x.dist-info")
    assert state(tree) == snap


def test_failure_while_replacing_rolls_back_at_once(tree, monkeypatch):
    before = state(tree)
    real = os.replace
    calls = []

    def failing(src, dst):
        calls.append(dst)
        if str(dst).endswith("d.txt"):
            raise OSError(30, "Read-only file system")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    with (
        pytest.raises(TreeError, match="cannot write .*d.txt: Read-only file system"),
        journal.Transaction(tree / "x.dist-info", "test") as t,
    ):
        t.put(tree / "a.txt", b"A2")
        t.put(tree / "d.txt", b"D2")
        t.commit()
    monkeypatch.setattr(os, "replace", real)
    assert state(tree) == before


def test_an_error_while_staging_changes_nothing(tree):
    before = state(tree)
    with pytest.raises(RuntimeError), journal.Transaction(tree / "x.dist-info", "test") as t:
        t.put(tree / "a.txt", b"A2")
        raise RuntimeError("boom")
    assert state(tree) == before


# -- a rollback that meets a file it cannot change ----------------------------------


def _immutable(monkeypatch, target: Path) -> None:
    """target as `chattr +i` leaves it: readable, but no rename over it and
    no change of its mode, owner or times (EPERM). The install-level case,
    with a real `chattr +i`, is tests/unit/env/test_install.py's."""

    def guard(real, at: int):
        def call(*args, **kw):
            if Path(args[at]) == target:
                raise PermissionError(errno.EPERM, "Operation not permitted", str(args[at]))
            return real(*args, **kw)

        return call

    monkeypatch.setattr(os, "replace", guard(os.replace, 1))
    for name in ("chmod", "utime", "chown"):
        monkeypatch.setattr(os, name, guard(getattr(os, name), 0))


def _stage(t: journal.Transaction, root: Path) -> None:
    """The files of SCRIPT's transaction, d.txt last."""
    t.put(root / "a.txt", b"A2")
    t.delete(root / "b.txt")
    t.put(root / "new/deep/c.txt", b"C", 0o600)
    t.put(root / "d.txt", b"D2")


def test_a_file_it_cannot_replace_leaves_every_file_as_it_was(tree, monkeypatch):
    """A.txt, b.txt and c.txt are replaced, then d.txt cannot be;
    restoring d.txt's mode and mtime (never changed) must not stop the
    rollback of the others, and only a checked rollback says nothing was
    changed."""
    before = state(tree)
    _immutable(monkeypatch, tree / "d.txt")
    with pytest.raises(TreeError) as err, journal.Transaction(tree / "x.dist-info", "test") as t:
        _stage(t, tree)
        t.commit()
    monkeypatch.undo()
    assert state(tree) == before
    line = str(err.value)
    assert "cannot write" in line and "d.txt: Operation not permitted" in line
    assert "rolled back and checked: nothing was changed" in line
    assert not (tree / "x.dist-info" / journal.FOLDER).exists()


def test_a_rollback_that_cannot_restore_an_attribute_says_so(tree, monkeypatch):
    """The rollback goes on past a file whose mtime it cannot put back,
    names it, keeps the journal (the next run finishes it) and never says
    nothing was changed."""
    before = state(tree)
    real_replace, real_utime = os.replace, os.utime

    def replace(src, dst):
        if Path(dst) == tree / "d.txt":
            raise OSError(errno.EROFS, "Read-only file system")
        return real_replace(src, dst)

    def utime(path, *args, **kw):
        if Path(path) == tree / "b.txt":
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real_utime(path, *args, **kw)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "utime", utime)
    with pytest.raises(TreeError) as err, journal.Transaction(tree / "x.dist-info", "test") as t:
        _stage(t, tree)
        t.commit()
    monkeypatch.undo()
    line = str(err.value)
    assert "nothing was changed" not in line
    assert "d.txt: Read-only file system" in line
    assert f"could not restore {tree / 'b.txt'} (mtime: Operation not permitted)" in line
    assert str(tree / "x.dist-info" / journal.FOLDER) in line
    now = state(tree)
    for f in ("a.txt", "d.txt"):  # every other file is back (a.txt after b.txt)
        assert now[f] == before[f]
    assert "new/" not in now and now["b.txt"][:2] == before["b.txt"][:2]
    assert (tree / "x.dist-info" / journal.FOLDER / journal.STATE).exists()
    assert "rolled back" in journal.recover(tree / "x.dist-info")
    assert state(tree) == before


def test_recovery_goes_on_past_a_file_it_cannot_restore(tree, monkeypatch):
    """A run killed while replacing, recovered while one file cannot be
    put back: every other file is restored, that one is named, and the
    journal stays until a later recovery is complete."""
    before = state(tree)
    assert run(tree, 17).returncode == -signal.SIGKILL
    assert (tree / "x.dist-info" / journal.FOLDER / journal.STATE).exists()
    real = os.replace

    def replace(src, dst):
        if Path(dst) == tree / "b.txt":
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(TreeError, match=r"could not restore .*b\.txt \(content: Operation not"):
        journal.recover(tree / "x.dist-info")
    monkeypatch.undo()
    assert not (tree / "b.txt").exists()
    assert state(tree)["a.txt"] == before["a.txt"] and not (tree / "new").exists()
    assert (tree / "x.dist-info" / journal.FOLDER / journal.STATE).exists()
    assert "rolled back" in journal.recover(tree / "x.dist-info")
    assert state(tree) == before
    assert not (tree / "x.dist-info" / journal.FOLDER).exists()
