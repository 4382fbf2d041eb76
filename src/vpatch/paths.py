"""Paths: safety shared by archives, wheels and patches (nothing may write
outside its destination), the traces a killed run leaves behind, and the
one lock two runs take on one folder (lock_or_refuse, held).

A run that is killed (SIGKILL, power loss) cannot clean up. So whatever
vpatch writes is either made under a temporary name and renamed into place
(`.<name>.<pid>.part` / `.tmp`: `tmp_path`), which a later run removes once
that process is gone (`sweep`) and never uses; or, for a folder vpatch
fills (fetch --dest, apply's first fetch), marked with PARTIAL until it is
complete, so a later run knows the half-made folder is its own and starts
it over, while a folder with anyone else's content is still refused.
Temporary trees (`scratch`: a port's releases, lint's trees, a wheel's
overlay, 80-150 MB each) carry their pid in their name the same way, and
the next run that makes one removes those of killed runs."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import TreeError, UnsafePathError, VpatchError, disk_error

PARTIAL = ".vpatch-partial"
_TEMP = re.compile(r"^\..+\.(\d+)(?:-\d+)?\.(part|tmp)$")


def safe_relpath(name: str, what: str) -> PurePosixPath:
    """`name` as a relative path that stays inside its root, or UnsafePathError."""
    p = PurePosixPath(name.replace("\\", "/"))
    if not name or p.is_absolute() or name.startswith("/") or ":" in p.parts[0]:
        raise UnsafePathError(f"{what}: absolute path {name!r} refused")
    if ".." in p.parts:
        raise UnsafePathError(f"{what}: path {name!r} escapes the destination ('..')")
    return p


def check_link(root: Path, link: PurePosixPath, target: str, what: str) -> None:
    """A symlink at root/link pointing to target must resolve inside root."""
    if os.path.isabs(target):
        raise UnsafePathError(f"{what}: symlink {link} -> {target} points outside")
    resolved = os.path.normpath(os.path.join(os.path.dirname(str(link)), target))
    if resolved == ".." or resolved.startswith("../") or os.path.isabs(resolved):
        raise UnsafePathError(f"{what}: symlink {link} -> {target} points outside")


def inside(root: Path, path: Path) -> bool:
    root = root.resolve()
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return False
    return True


def remove(p: Path) -> None:
    """p gone, whatever else removes entries in it meanwhile (a git a person
    ran in a tree may still be packing it): an entry already gone is no
    error, and a folder that filled again is tried again (four tries in all)."""
    if not (p.is_dir() and not p.is_symlink()):
        p.unlink(missing_ok=True)
        return

    def gone_already(func: Any, path: str, exc: Any) -> None:
        if not isinstance(exc[1], FileNotFoundError):
            raise exc[1]

    for tries_left in reversed(range(4)):
        try:
            shutil.rmtree(p, onerror=gone_already)
            return
        except OSError as e:
            if e.errno != errno.ENOTEMPTY or not tries_left:
                raise


def empty(folder: Path) -> None:
    """Remove everything inside folder, keeping the folder itself."""
    for p in folder.iterdir():
        remove(p)


def make_folder(dest: Path, what: str) -> bool:
    """Make dest (and its parents) unless it is a folder already; whether this
    made it, so that a failed run removes only what it created. A file there
    is refused (TreeError)."""
    if dest.exists() and not dest.is_dir():
        raise TreeError(f"{dest} exists and is not a folder; pick an empty or new one")
    created = not dest.exists()
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise disk_error(e, f"cannot make {what}") from None
    return created


def tmp_path(path: Path, kind: str = "tmp") -> Path:
    """The temporary name a file is written under before it is renamed to
    path: `.<name>.<pid>-<thread>.<kind>` beside it (kind: part for
    downloads, tmp). The thread id keeps two threads of one process (a
    library caller building in parallel) off each other's file; the pid
    tells sweep whether its writer is gone."""
    return path.with_name(f".{path.name}.{os.getpid()}-{threading.get_native_id()}.{kind}")


def alive(pid: int) -> bool:
    """Whether a process with this id runs (one of another user counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, and is not ours
        return True
    return True


def sweep(folder: Path) -> list[Path]:
    """Remove the temporary files (tmp_path) in folder whose process is gone;
    the removed paths. A missing folder has none."""
    removed: list[Path] = []
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return removed
    except OSError as e:
        raise disk_error(e, "cannot list a folder") from None
    for name in names:
        m = _TEMP.match(name)
        if m and not alive(int(m.group(1))):
            p = folder / name
            try:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink(missing_ok=True)
            except OSError as e:
                raise disk_error(e, "cannot remove a killed run's temporary file") from None
            removed.append(p)
    return removed


# the temporary trees vpatch makes in TMPDIR (scratch), by their name's start
SCRATCH = ("vpatch-port-", "vpatch-lint-", "vpatch-patch-")


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[str]:
    """A temporary folder in TMPDIR, `<prefix><pid>-<random>`, removed when
    the block ends however it ends (an exception, Ctrl-C). A SIGKILL cannot
    remove it: so first the folders of this prefix whose process is gone
    are removed (sweep_scratch)."""
    sweep_scratch(prefix)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-") as tmp:
        yield tmp


def sweep_scratch(prefix: str) -> list[Path]:
    """Remove the scratch folders of `prefix` in TMPDIR that a killed run
    left: named with a pid no process has, owned by this user (another
    user's are theirs to remove). Best effort: what cannot be removed
    stays, and the run goes on. A pid reused since only keeps a folder
    longer. The removed paths."""
    top = Path(tempfile.gettempdir())
    mine = re.compile(rf"^{re.escape(prefix)}(\d+)-")
    removed: list[Path] = []
    try:
        names = os.listdir(top)
    except OSError:
        return removed
    for name in names:
        m = mine.match(name)
        if not m or alive(int(m.group(1))):
            continue
        p = top / name
        try:
            st = p.lstat()
        except OSError:
            continue
        if p.is_symlink() or not p.is_dir() or st.st_uid != os.getuid():
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def write_atomic(path: Path, data: bytes) -> None:
    """path with data, or as it was: written under tmp_path, then renamed.
    OSError is the caller's to convert (it knows what it was writing)."""
    tmp = tmp_path(path)
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def lock_or_refuse(
    fd: int,
    busy: str,
    doing: str,
    wait: float = 0.0,
    failed: Callable[[OSError, str], VpatchError] = disk_error,
) -> None:
    """An exclusive flock on `fd`: the one lock vpatch takes (a tree, a
    carry's work folder, an environment). Another run holding it is
    TreeError(`busy`): at once by default, so a second run says so instead of
    hanging behind the first, or once `wait` seconds have passed without it
    letting go. The lock itself failing is `failed(e, doing)`: a DiskError
    unless the caller's errors say otherwise (an environment's: TreeError)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise failed(e, doing) from None
            if time.monotonic() >= deadline:
                raise TreeError(busy) from None
        time.sleep(0.05)


@contextlib.contextmanager
def held(
    folder: Path,
    busy: str,
    what: str,
    wait: float = 0.0,
    failed: Callable[[OSError, str], VpatchError] = disk_error,
) -> Iterator[None]:
    """lock_or_refuse on the folder itself, for the block: its descriptor is
    locked, so no lock file is made, and the lock goes with the process
    however it ends. `what` names the folder in an error (`failed(e,
    "cannot open " + what)`, "cannot lock ...")."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise failed(e, f"cannot open {what}") from None
    try:
        lock_or_refuse(fd, busy, f"cannot lock {what}", wait, failed)
        yield
    finally:
        os.close(fd)
