"""paths.py: nothing an archive, a wheel or a patch names may land outside
its destination; and the one lock (lock_or_refuse, held)."""

import errno
import fcntl
import os
import subprocess
import sys
import threading
import time
from pathlib import Path, PurePosixPath

import pytest
from vpatch import paths
from vpatch.errors import DiskError, TreeError, UnsafePathError
from vpatch.paths import check_link, empty, inside, make_folder, safe_relpath, sweep, tmp_path


@pytest.mark.parametrize("name", ["vllm/a.py", "a", "vllm/..b/c..py", "dir/"])
def test_relative_names_inside_are_kept(name):
    assert safe_relpath(name, "w.whl") == PurePosixPath(name)


@pytest.mark.parametrize(
    "name, why",
    [
        ("/etc/passwd", "absolute path"),
        ("", "absolute path"),
        ("C:/evil.py", "absolute path"),
        ("../evil.py", "escapes the destination"),
        ("vllm/../../evil.py", "escapes the destination"),
        ("vllm\\..\\..\\evil.py", "escapes the destination"),  # backslashes count as folders
    ],
)
def test_unsafe_names_are_refused(name, why):
    with pytest.raises(UnsafePathError, match=f"^w.whl: .*{why}"):
        safe_relpath(name, "w.whl")


def test_backslashes_become_folders():
    assert safe_relpath("vllm\\a.py", "w") == PurePosixPath("vllm/a.py")


@pytest.mark.parametrize(
    "link, target, ok",
    [
        ("vllm/a", "b.py", True),
        ("vllm/sub/a", "../b.py", True),
        ("vllm/a", "../setup.py", True),
        ("vllm/a", "../../outside", False),
        ("a", "..", False),
        ("vllm/a", "/etc/passwd", False),
    ],
)
def test_symlinks_must_resolve_inside(link, target, ok):
    if ok:
        check_link(Path("."), PurePosixPath(link), target, "s.tar.gz")
    else:
        with pytest.raises(UnsafePathError, match="points outside"):
            check_link(Path("."), PurePosixPath(link), target, "s.tar.gz")


def test_inside(tmp_path):
    (tmp_path / "root" / "a").mkdir(parents=True)
    (tmp_path / "root" / "out").symlink_to(tmp_path)
    assert inside(tmp_path / "root", tmp_path / "root" / "a" / "b")
    assert not inside(tmp_path / "root", tmp_path / "root" / ".." / "x")
    assert not inside(tmp_path / "root", tmp_path / "root" / "out" / "x")  # through a link


def test_empty_keeps_the_folder_and_does_not_follow_links(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    folder = tmp_path / "folder"
    (folder / "sub" / "deeper").mkdir(parents=True)
    (folder / "sub" / "deeper" / "f").write_text("f")
    (folder / "file").write_text("x")
    (folder / "link").symlink_to(keep)
    empty(folder)
    assert folder.is_dir() and list(folder.iterdir()) == []
    assert (keep / "precious").read_text() == "x"  # the link went, not what it points at


def test_two_threads_write_under_different_temporary_names(tmp_path):
    """Two threads of one process fetching the same artifact must not share a
    temporary file (one would rename it under the other)."""
    target = tmp_path / "x.whl"
    names: list[Path] = []
    threads = [threading.Thread(target=lambda: names.append(tmp_path_of(target))) for _ in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(names)) == 2


def tmp_path_of(target: Path) -> Path:
    return tmp_path(target, "part")


def test_sweep_removes_only_files_of_gone_processes(tmp_path):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = int(gone.stdout)
    mine = tmp_path_of(tmp_path / "x.whl")
    for name in (f".x.whl.{dead}-7.part", f".y.{dead}.tmp", mine.name, "x.whl"):
        (tmp_path / name).write_text("")
    removed = sorted(p.name for p in sweep(tmp_path))
    assert removed == sorted([f".x.whl.{dead}-7.part", f".y.{dead}.tmp"])
    assert mine.exists() and (tmp_path / "x.whl").exists()


def test_make_folder_says_whether_it_made_it_and_refuses_a_file(tmp_path):
    new = tmp_path / "a" / "b"
    assert make_folder(new, "the tree") is True
    assert make_folder(new, "the tree") is False
    (tmp_path / "f").write_text("x")
    with pytest.raises(TreeError, match="exists and is not a folder"):
        make_folder(tmp_path / "f", "the tree")
    assert (tmp_path / "f").read_text() == "x"


def test_a_killed_runs_temporary_trees_are_removed_by_the_next(tmp_path, monkeypatch):
    """A SIGKILL leaves a port's, lint's or an overlay's tree in TMPDIR (80-150
    MB each): the next run making one removes those whose process
    is gone, and no other."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead, me = int(gone.stdout), os.getpid()
    for prefix in paths.SCRATCH:
        (tmp_path / f"{prefix}{dead}-abc/tree").mkdir(parents=True)
        (tmp_path / f"{prefix}{me}-live").mkdir()
    (tmp_path / "vpatch-port-notmine").mkdir()  # no pid: not a tree of ours
    for prefix in paths.SCRATCH:
        with paths.scratch(prefix) as tmp:
            assert Path(tmp).name.startswith(f"{prefix}{me}-")
            assert Path(tmp).parent == tmp_path
        assert not Path(tmp).exists()
        assert not (tmp_path / f"{prefix}{dead}-abc").exists()
        assert (tmp_path / f"{prefix}{me}-live").exists()
    assert (tmp_path / "vpatch-port-notmine").exists()


def _raced_git_tree(tmp_path, monkeypatch):
    """A port tree whose loose objects another process (a git a person ran
    there, packing) deletes as they are removed: each unlink finds its
    entry already gone."""
    port = tmp_path / "port"
    for d in ("be", "17"):
        (port / ".git" / "objects" / d).mkdir(parents=True)
        (port / ".git" / "objects" / d / ("0" * 38)).write_text("x")
    real = os.unlink

    def raced(path, *args, **kw):
        real(path, *args, **kw)
        if str(path).startswith("0"):
            raise FileNotFoundError(2, "No such file or directory", str(path))

    monkeypatch.setattr(os, "unlink", raced)
    return port


def test_a_tree_is_removed_while_something_else_removes_in_it(tmp_path, monkeypatch):
    """An entry already gone is no error (the carry drill failed once with
    "cannot tidy ...: be: no such file or folder")."""
    port = _raced_git_tree(tmp_path, monkeypatch)
    paths.remove(port)
    assert not port.exists()


def test_a_tree_is_emptied_while_something_else_removes_in_it(tmp_path, monkeypatch):
    """empty (a checkout tree cleared for a new release) takes the same
    care, and keeps the folder."""
    port = _raced_git_tree(tmp_path, monkeypatch)
    empty(port)
    assert port.is_dir() and not any(port.iterdir())


# -- the one lock: lock_or_refuse, held ------------------------------------------------


def test_a_held_lock_is_refused_at_once_or_after_the_wait(tmp_path):
    """Another run's lock (another open file: flock is per open file) is
    TreeError(busy) at once by default, and after `wait` seconds when told
    to wait; taken as soon as the other lets go within the wait."""
    other = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(other, fcntl.LOCK_EX)
    t0 = time.monotonic()
    with pytest.raises(TreeError, match="^busy$"), paths.held(tmp_path, "busy", "it"):
        pass
    assert time.monotonic() - t0 < 0.5
    with pytest.raises(TreeError, match="^busy$"), paths.held(tmp_path, "busy", "it", wait=0.3):
        pass
    assert time.monotonic() - t0 >= 0.3
    threading.Timer(0.2, os.close, (other,)).start()
    with paths.held(tmp_path, "busy", "it", wait=10):
        assert time.monotonic() - t0 >= 0.5


def test_a_lock_that_fails_is_the_callers_error(tmp_path):
    """Not another run's lock but the lock itself failing (a descriptor
    flock refuses, a folder that cannot be opened): a DiskError naming what
    it was doing, or the caller's error for it (an environment's: TreeError)."""
    bad = os.open(tmp_path, os.O_RDONLY)
    os.close(bad)  # EBADF
    with pytest.raises(DiskError, match="^cannot lock it: "):
        paths.lock_or_refuse(bad, "busy", "cannot lock it")

    def mine(e: OSError, doing: str) -> TreeError:
        return TreeError(f"{doing} ({e.errno})")

    with pytest.raises(TreeError, match=rf"^cannot lock it \({errno.EBADF}\)$"):
        paths.lock_or_refuse(bad, "busy", "cannot lock it", failed=mine)
    gone = tmp_path / "gone"
    with (
        pytest.raises(DiskError, match="^cannot open the tree: "),
        paths.held(gone, "b", "the tree"),
    ):
        pass
    with (
        pytest.raises(TreeError, match=rf"^cannot open x \({errno.ENOENT}\)$"),
        paths.held(gone, "b", "x", failed=mine),
    ):
        pass
