"""All-or-nothing replacement of a set of files, safe against a kill at any
point.

A transaction stages everything first inside `<dist-info>/vpatch-journal/`:
a copy of every file it will replace or remove (`<n>.old`) and every new
content (`<n>.new`, on the same file system as its target, so the final
`os.replace` is atomic). Then it writes `journal.json` (atomically: a
temporary file renamed over), which lists every file with its old and new
hash, mode and mtime. Only then are the files replaced, one `os.replace`
each. Last, `journal.json` is removed and the folder with it.

`recover` is run first by every install, uninstall and check:

  no folder                      nothing was interrupted
  folder without journal.json    interrupted while staging: nothing in the
                                 environment was changed; the folder goes
  folder with journal.json       interrupted while replacing: every file is
                                 put back as it was (content, mode, mtime:
                                 a timestamp .pyc of the original is valid
                                 again), then the folder goes

Rolling back is idempotent, so a kill during recovery is recovered by the
next run. A file that is neither its old nor its new content means the
environment changed under the journal (vLLM reinstalled?): recovery then
refuses, names it, and changes nothing.

A file the rollback cannot put back (a read-only mount, `chattr +i`) does
not stop it: every other file is restored, then each is checked (content,
mode, mtime); the folder goes only when all are as they were, else the
error names what is not and the next run tries again. A file the failed
run never replaced is left alone, attributes included, since they are
already its own. The same rollback, run at once, undoes a commit that
fails, and only its check lets the error say that nothing was changed.

Files are fsynced before the journal names them and the journal before
the first replacement, so a power loss is covered too.

Test hook: with VPATCH_TEST_KILL_AT=N the process SIGKILLs itself at the
N-th step (every write, rename and removal is a step), which is how the
tests kill a run at chosen points of it; N=0 only counts the steps.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import record, settings
from ..errors import TreeError, VpatchError

FOLDER = "vpatch-journal"
STATE = "journal.json"


# -- fault injection (tests) -----------------------------------------------------

_steps = 0


def point() -> None:
    """One step of a transaction: where VPATCH_TEST_KILL_AT kills (0: kill
    nowhere, print the number of steps on stderr at exit)."""
    global _steps
    at = os.environ.get("VPATCH_TEST_KILL_AT")
    if not at:
        return
    if _steps == 0 and at == "0":
        atexit.register(lambda: print(f"vpatch-test-steps {_steps}", file=sys.stderr))
    _steps += 1
    if _steps == settings.whole(at, "VPATCH_TEST_KILL_AT", 0):
        os.kill(os.getpid(), signal.SIGKILL)


# -- small durable file operations --------------------------------------------------


def hash_file(path: Path) -> str | None:
    """RECORD-style hash of a file, None when there is none."""
    try:
        return record.hash_of(path.read_bytes())
    except FileNotFoundError:
        return None


def write_durable(path: Path, data: bytes, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)  # not the umask's: the mode the file had
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# -- the journal ----------------------------------------------------------------


@dataclass
class Entry:
    path: str  # absolute
    old: str | None  # hash before; None: the file did not exist
    new: str | None  # hash after; None: the file is removed
    mode: int | None = None  # st_mode & 0o7777 before
    mtime_ns: int | None = None  # before
    backup: str | None = None  # <n>.old in the journal folder
    staged: str | None = None  # <n>.new in the journal folder
    owner: tuple[int, int] | None = None  # (uid, gid) the file keeps (or a new one gets)


class Transaction:
    """Stage with put/reserve/delete, then commit. Use as a context manager:
    leaving it without commit (an error) undoes everything staged."""

    def __init__(self, dist_info: Path, what: str):
        self.dist_info = dist_info
        self.dir = dist_info / FOLDER
        self.what = what
        self.entries: list[Entry] = []
        self._reserved: dict[int, tuple[int, int | None]] = {}
        self._committing = False
        self.done = False

    def __enter__(self) -> Transaction:
        try:
            self.dir.mkdir()
        except FileExistsError:
            raise TreeError(f"{self.dir} exists: another vpatch run was interrupted") from None
        except OSError as e:
            raise _write_error(self.dir, e) from None
        point()
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if self.done:
            return
        if self._committing:
            # roll back what was replaced; if that fails too, the next run
            # recovers, and the first error is the one to report
            with contextlib.suppress(VpatchError):
                recover(self.dist_info)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    # staging ---------------------------------------------------------------------

    def _entry(self, path: Path) -> tuple[int, Entry]:
        n = len(self.entries)
        e = Entry(str(path), None, None)
        try:
            st = path.stat()
        except FileNotFoundError:
            st = None
        e.owner = owner_of(path, st)
        if st is not None:
            data = path.read_bytes()
            e.old = record.hash_of(data)
            e.mode = st.st_mode & 0o7777
            e.mtime_ns = st.st_mtime_ns
            e.backup = f"{n}.old"
            self._write(self.dir / e.backup, data, e.mode)
            chown(self.dir / e.backup, e.owner)
        self.entries.append(e)
        return n, e

    def _write(self, path: Path, data: bytes, mode: int) -> None:
        try:
            write_durable(path, data, mode)
        except OSError as e:
            raise _write_error(path, e) from None
        point()

    def put(
        self, path: Path, data: bytes, mode: int | None = None, mtime_ns: int | None = None
    ) -> Path:
        """path will have data (mode: the old one, else 0o644; mtime: now,
        or mtime_ns). Returns the staged file, which becomes path."""
        n, e = self._entry(path)
        e.new = record.hash_of(data)
        e.staged = f"{n}.new"
        staged = self.dir / e.staged
        self._write(staged, data, mode if mode is not None else (e.mode or 0o644))
        chown(staged, e.owner)
        if mtime_ns is not None:
            os.utime(staged, ns=(mtime_ns, mtime_ns))
        return staged

    def reserve(self, path: Path) -> Path:
        """A staged file the caller writes (a compiler's output) that will
        replace path at commit."""
        n, e = self._entry(path)
        e.staged = f"{n}.new"
        self._reserved[n] = (e.mode or 0o644, None)
        return self.dir / e.staged

    def delete(self, path: Path) -> None:
        self._entry(path)

    # commit ------------------------------------------------------------------------

    def commit(self, prune: Sequence[Path] = ()) -> None:
        """Replace every file; then remove the empty folders among prune
        (deepest first)."""
        for n, (mode, _) in self._reserved.items():
            e = self.entries[n]
            assert e.staged is not None  # reserved entries are staged
            staged = self.dir / e.staged
            try:
                data = staged.read_bytes()
                os.chmod(staged, mode)
                chown(staged, e.owner)
                with open(staged, "rb+") as f:
                    os.fsync(f.fileno())
            except OSError as err:
                raise _write_error(staged, err) from None
            e.new = record.hash_of(data)
        parents = {Path(e.path).parent for e in self.entries}
        state = {
            "what": self.what,
            "entries": [asdict(e) for e in self.entries],
            "created": [str(p) for p in sorted(_missing(parents))],
        }
        tmp = self.dir / (STATE + ".tmp")
        self._write(tmp, json.dumps(state, indent=1).encode(), 0o644)
        fsync_dir(self.dir)
        os.replace(tmp, self.dir / STATE)
        fsync_dir(self.dir)
        self._committing = True
        point()
        target = self.dir
        try:
            for p in sorted(_missing(parents)):
                target = p
                p.mkdir(parents=True, exist_ok=True)
                chown(p, owner_of(p.parent))
            for e in self.entries:
                target = Path(e.path)
                if e.staged is not None:
                    os.replace(self.dir / e.staged, target)
                elif e.old is not None:
                    target.unlink(missing_ok=True)
                point()
            for p in parents:
                fsync_dir(p)
            for p in sorted(prune, key=lambda p: len(p.parts), reverse=True):
                with contextlib.suppress(OSError):
                    p.rmdir()  # only when empty
            (self.dir / STATE).unlink()
            fsync_dir(self.dir)
            point()
        except OSError as err:
            raise self._undo(target, err) from None
        self.done = True
        shutil.rmtree(self.dir, ignore_errors=True)
        point()

    def _undo(self, target: Path, err: OSError) -> TreeError:
        """Roll back at once after replacing failed: the error to raise, which
        says nothing was changed only when the rollback was checked
        complete."""
        self.done = True  # __exit__ has nothing left to do
        head = f"cannot write {target}: {err.strerror or err} ({_WHY})"
        try:
            recover(self.dist_info)
        except TreeError as left:
            return TreeError(f"{head}; {left}")
        return TreeError(f"{head}; rolled back and checked: nothing was changed")


def owner_of(path: Path, st: os.stat_result | None = None) -> tuple[int, int]:
    """The owner a file at path keeps: its own, or that of the nearest
    existing folder above it for a new one."""
    while st is None:
        try:
            st = path.stat()
        except FileNotFoundError:
            path = path.parent
    return st.st_uid, st.st_gid


def chown(path: Path, owner: tuple[int, int] | None) -> None:
    """Run as root on another user's environment (sudo), new files keep
    that user as owner, so the user can still change or pip-uninstall them."""
    if owner is not None and _chowns(owner):
        os.chown(path, *owner)


def _chowns(owner: tuple[int, int]) -> bool:
    return os.geteuid() == 0 and owner != (0, 0)


def _missing(folders: Iterable[Path]) -> set[Path]:
    """The folders (and their parents) that do not exist yet."""
    out = set()
    for f in folders:
        while not f.exists():
            out.add(f)
            f = f.parent
    return out


_WHY = "read-only or another user's environment?"


def _write_error(path: Path, e: OSError) -> TreeError:
    """Writing while staging failed: only the journal's folder was written."""
    return TreeError(f"cannot write {path}: {e.strerror or e} ({_WHY}); nothing was changed")


# -- recovery -------------------------------------------------------------------


def pending(dist_info: Path) -> bool:
    return (dist_info / FOLDER).exists()


def recover(dist_info: Path) -> str | None:
    """Finish an interrupted run by rolling it back (see the module
    docstring). What was done, for the user, or None when nothing was
    pending."""
    folder = dist_info / FOLDER
    if not folder.is_dir():
        return None
    state = folder / STATE
    try:
        data = json.loads(state.read_text())
    except FileNotFoundError:
        _rmtree(folder)
        return "removed the staging of an interrupted vpatch run (it had changed nothing)"
    except (OSError, ValueError) as bad:
        raise TreeError(f"cannot read {state}: {bad}; remove {folder} after checking") from None
    entries = [Entry(**x) for x in data["entries"]]
    for e in entries:
        cur = hash_file(Path(e.path))
        if cur not in (e.old, e.new):
            raise TreeError(
                f"{e.path} changed since an interrupted vpatch {data['what']} (vLLM reinstalled?); "
                f"nothing was rolled back: check it, then remove {folder}"
            )
    failed: dict[str, tuple[str, str]] = {}  # path: (what, why) of the first failure
    restored = 0
    for e in reversed(entries):
        try:
            restored += _restore(folder, e)
        except _Failed as f:
            failed[e.path] = (f.what, f.why)
        point()
    created = [Path(p) for p in data.get("created", [])]
    for p in sorted(created, key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            p.rmdir()
    for p in {Path(e.path).parent for e in entries}:
        fsync_dir(p)
    left = [(e.path, failed.get(e.path) or (w, "")) for e in entries if (w := _differs(e))]
    # a folder it made that holds a file of someone else's stays, and is no fault
    left += [(str(p), ("folder not removed", "")) for p in created if _empty_dir(p)]
    if left:
        path, (what, why) = left[0]
        more = f" (and {len(left) - 1} more)" if len(left) > 1 else ""
        raise TreeError(
            f"the rollback of vpatch {data['what']} could not restore {path} "
            f"({what}{': ' + why if why else ''}){more}; every other file is back; {folder} "
            "is kept: run vpatch again as the environment's owner to finish"
        )
    try:
        state.unlink()
        fsync_dir(folder)
        point()
    except OSError as err:
        raise TreeError(f"cannot remove {state}: {err.strerror or err}") from None
    _rmtree(folder)
    return f"rolled back an interrupted vpatch {data['what']} ({restored} files restored)"


def _empty_dir(p: Path) -> bool:
    try:
        return p.is_dir() and next(p.iterdir(), None) is None
    except OSError:
        return False


class _Failed(Exception):
    """Restoring one file failed: which part of it (content, owner, mode,
    mtime) and why."""

    def __init__(self, what: str, err: OSError):
        super().__init__(what)
        self.what, self.why = what, err.strerror or str(err)


def _restore(folder: Path, e: Entry) -> int:
    """Put one file back; 1 when its content was replaced. What is already
    as it was is not touched (a file the run never replaced may be one
    nothing can change)."""
    target = Path(e.path)
    cur = hash_file(target)
    if e.old is None:
        if cur is None:
            return 0
        try:
            target.unlink()
        except OSError as err:
            raise _Failed("content", err) from None
        return 1
    n = 0
    try:
        if cur != e.old:
            target.parent.mkdir(parents=True, exist_ok=True)
            assert e.backup is not None  # a file that existed was backed up
            os.replace(folder / e.backup, target)
            n = 1
        st = target.stat()
    except OSError as err:
        raise _Failed("content", err) from None
    # content is right; owner, mode and mtime too (a timestamp .pyc checks mtime)
    first = None
    for what in _wrong(e, st):
        try:
            if what == "owner":
                assert e.owner is not None
                chown(target, _owner(e))
            elif what == "mode":
                assert e.mode is not None
                os.chmod(target, e.mode)
            else:
                assert e.mtime_ns is not None
                os.utime(target, ns=(e.mtime_ns, e.mtime_ns))
        except OSError as err:
            first = first or _Failed(what, err)
    if first is not None:
        raise first
    return n


def _owner(e: Entry) -> tuple[int, int]:
    assert e.owner is not None
    uid, gid = e.owner  # a list once read back from JSON
    return uid, gid


def _wrong(e: Entry, st: os.stat_result) -> list[str]:
    """The attributes of a file that are not as the journal found them
    (its owner only where vpatch sets one: `chown`)."""
    out = []
    if e.owner is not None and _chowns(_owner(e)) and (st.st_uid, st.st_gid) != _owner(e):
        out.append("owner")
    if e.mode is not None and st.st_mode & 0o7777 != e.mode:
        out.append("mode")
    if e.mtime_ns is not None and st.st_mtime_ns != e.mtime_ns:
        out.append("mtime")
    return out


def _differs(e: Entry) -> str | None:
    """What of a file is not as the journal found it (content, owner, mode,
    mtime), or None."""
    target = Path(e.path)
    try:
        if hash_file(target) != e.old:
            return "content"
        wrong = [] if e.old is None else _wrong(e, target.stat())
    except OSError as err:
        return f"unreadable: {err.strerror or err}"
    return wrong[0] if wrong else None


def _rmtree(folder: Path) -> None:
    try:
        shutil.rmtree(folder)
    except OSError as e:
        raise TreeError(f"cannot remove {folder}: {e.strerror or e}") from None
    point()
