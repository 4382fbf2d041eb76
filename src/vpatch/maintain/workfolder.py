"""A carry's work folder (build/carry-TO, or `--work DIR`): carry's own, and
nobody else's.

- It is marked (MARKER) when carry makes it, or takes an empty folder; a
  folder holding anything without the mark, the checkout itself, a folder
  holding the checkout, or one inside the checkout's .git or src/ is
  refused before anything is touched. Nothing unmarked is ever removed.
- One carry at a time: the mark is flock-ed for the whole run (the kernel
  drops the lock when its process dies, so a killed carry never blocks the
  next).
- A new run moves the last proposal (report.md, proposed.diff, proposed/)
  to previous/ before it starts; a run that fails removes what it made,
  and previous/ stays.
- A conflict the carry stopped at is recorded (STATE: TO, FROM, the patch,
  the port's baseline commit): `--continue` goes on from that and nothing
  else.
- The checkout files the carry copied are recorded with their sha256
  (COPIED), so `--write` can refuse a checkout that changed since."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, TreeError, disk_error
from ..paths import lock_or_refuse, remove, write_atomic
from ..sources.cache import sha256_file

MARKER = ".vpatch-carry"
STATE = "stopped.json"  # the conflict a carry stopped at
COPIED = "copied.json"  # sha256 of each checkout file the carry copied
PREVIOUS = "previous"
PROPOSAL = ("report.md", "proposed.diff", "proposed")  # what a run leaves to review
PORT = "port"
_MADE_BY = "made by vpatch carry: a carry moves, replaces and removes what this folder holds\n"


@dataclass(frozen=True)
class Stop:
    """The conflict a carry stopped at."""

    to_version: str
    from_version: str
    patch: str
    base: str  # the commit of TO's baseline in the port's tree


class Folder:
    """A claimed work folder (claim()): marked, locked, this run's."""

    def __init__(self, path: Path, made: Path | None, marked: bool):
        self.path = path
        self.made = made  # the topmost folder this run made (path or a parent)
        self.marked = marked  # this run marked it (made it, or took it empty)

    @property
    def previous(self) -> Path:
        return self.path / PREVIOUS

    # -- a new run --------------------------------------------------------------

    def refuse_stopped(self, again: str) -> None:
        """TreeError when the folder holds a conflict a carry stopped at:
        only `--continue` goes on from it. Reads, touches nothing."""
        stop = self.stopped()
        if stop is not None:
            raise TreeError(
                f"{self.path} holds the conflict the carry to {stop.to_version} stopped at "
                f"({stop.patch}): go on with `vpatch carry {stop.to_version}{again} --continue`, "
                f"or remove {self.path} to start anew; nothing was touched"
            )

    def begin(self, to_version: str, again: str) -> bool:
        """Ready for a new run: refuse a recorded conflict; move the last
        proposal to previous/ (whether one was moved); remove what a killed
        run left (its half-made proposal, port tree, records). The caller
        has found out first whatever can refuse the run (TO on the index):
        a run that fails later has moved and removed these for nothing."""
        self.refuse_stopped(again)
        try:
            moved = (self.path / "report.md").is_file()
            if moved:
                remove(self.previous)
                self.previous.mkdir()
                for name in PROPOSAL:
                    if (self.path / name).exists():
                        (self.path / name).rename(self.previous / name)
            self._clear()
        except OSError as e:
            raise disk_error(e, f"cannot ready {self.path}") from None
        return moved

    def abandon(self) -> None:
        """A failed new run: remove what it made; previous/ stays. The
        folder itself goes when this run made it and holds nothing else."""
        with contextlib.suppress(OSError):
            self._clear()
            (self.path / "report.md").unlink(missing_ok=True)
        self.release()

    def release(self) -> None:
        """A run that ends holding nothing in a folder it marked leaves it
        as it found it: no mark, and no folder when it made it."""
        with contextlib.suppress(OSError):
            left = {p.name for p in self.path.iterdir()}
            if self.marked and left <= {MARKER}:
                (self.path / MARKER).unlink()
                if self.made is not None:
                    _rmdirs(self.path, self.made)

    def _clear(self) -> None:
        for name in (STATE, COPIED, PORT, *PROPOSAL[1:]):
            remove(self.path / name)

    def finished(self) -> None:
        """A run that ended (a proposal, or --continue's): the port tree and
        the records go; report.md, proposed.diff, proposed/ stay."""
        try:
            for name in (STATE, PORT):
                remove(self.path / name)
        except OSError as e:
            raise disk_error(e, f"cannot tidy {self.path}") from None

    # -- a conflict --------------------------------------------------------------

    def record_stop(self, stop: Stop) -> None:
        self._write(STATE, vars(stop))

    def stopped(self) -> Stop | None:
        doc = self._read(STATE)
        try:
            return Stop(**doc) if doc is not None else None
        except TypeError:
            return None  # not carry's record: it stopped at nothing this can go on from

    # -- the checkout's files, as copied ----------------------------------------

    def record_copy(self, root: Path, copy: Path, files: list[str]) -> None:
        """The checkout `root` and the sha256 of each file copied from it,
        hashed in the copy (the bytes the carry read, whatever the checkout
        holds by now)."""
        sums = {rel: _digest(copy / rel) for rel in sorted(files)}
        self._write(COPIED, {"checkout": str(root), "files": sums})

    def changed_since_copy(self, root: Path, under: str, writing: list[str]) -> list[str]:
        """Checkout files that are not as the carry copied them: changed,
        removed, or new under `under` (the patch set); and any of `writing`
        the carry did not copy that exists now (a file it would add, made
        meanwhile). Nothing recorded: everything counts as changed."""
        doc = self._read(COPIED)
        if doc is None or doc.get("checkout") != str(root):
            return [f"{root} (the carry's copy of it is not recorded in {self.path})"]
        sums: dict[str, str | None] = doc.get("files", {})
        now = {p.relative_to(root).as_posix() for p in (root / under).rglob("*") if p.is_file()}
        changed = [rel for rel, s in sums.items() if _digest(root / rel) != s]
        changed += [rel for rel in now if rel not in sums]
        changed += [rel for rel in writing if rel not in sums and (root / rel).exists()]
        return sorted(set(changed))

    # -- records -----------------------------------------------------------------

    def _write(self, name: str, doc: dict[str, Any]) -> None:
        try:
            write_atomic(self.path / name, (json.dumps(doc, indent=1) + "\n").encode())
        except OSError as e:
            raise disk_error(e, f"cannot write {self.path / name}") from None

    def _read(self, name: str) -> dict[str, Any] | None:
        try:
            doc = json.loads((self.path / name).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        return doc if isinstance(doc, dict) else None


@contextlib.contextmanager
def claim(path: Path, checkout: Path) -> Iterator[Folder]:
    """The work folder, checked, made and marked, and locked for the block;
    TreeError (nothing touched) for a folder carry may not use."""
    _refuse(path, checkout)
    made = _topmost_missing(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        marker = path / MARKER
        marked = not marker.exists()
        if marked:
            marker.write_text(_MADE_BY)
        fd = os.open(marker, os.O_RDONLY)
    except OSError as e:
        if made is not None:
            _rmdirs(path, made)
        raise disk_error(e, f"cannot make {path}") from None
    try:
        lock_or_refuse(
            fd,
            f"another vpatch carry is working in {path}; wait for it to finish "
            "(nothing was touched)",
            f"cannot lock {path}",
        )
        folder = Folder(path, made, marked)
        try:
            yield folder
        except BaseException:
            folder.release()
            raise
    finally:
        os.close(fd)


def _refuse(path: Path, checkout: Path) -> None:
    where = path.resolve()
    top = checkout.resolve()
    why = ""
    if where == top or top.is_relative_to(where):
        why = "is the checkout, or holds it"
    elif ".git" in where.parts:
        why = "is inside a git repository's .git"
    elif where.is_relative_to(top / "src"):
        why = "is inside the checkout's src/ (its code and patch set)"
    elif path.exists() and not path.is_dir():
        why = "exists and is not a folder"
    elif path.is_dir():
        try:
            names = sorted(os.listdir(path))
        except OSError as e:
            raise disk_error(e, f"cannot read {path}") from None
        if names and MARKER not in names:
            why = f"holds files a carry did not make ({names[0]}{' ...' if len(names) > 1 else ''})"
    if why:
        raise TreeError(
            f"--work {path} {why}: a carry works only in a folder of its own (new, empty, or "
            f"one it made); nothing was touched"
        )


def _topmost_missing(path: Path) -> Path | None:
    """The topmost of path and its parents that does not exist yet (what
    mkdir(parents=True) makes), or None."""
    top = None
    for p in [path, *path.parents]:
        if p.exists() or p.is_symlink():
            break
        top = p
    return top


def _rmdirs(path: Path, upto: Path) -> None:
    """Remove path and its empty parents up to `upto` (the ones a run made);
    a folder someone filled meanwhile stays."""
    for p in [path, *path.parents]:
        try:
            p.rmdir()
        except OSError:
            return
        if p == upto:
            return


def _digest(p: Path) -> str | None:
    try:
        return sha256_file(p)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise disk_error(e, f"cannot read {p}") from None


def refuse_other_checkout(root: Path, data: str, here: Path | None = None) -> None:
    """ConfigError when the current folder is inside a vpatch checkout (one
    with pyproject.toml and `data`, the patch set's folder) other than
    `root`, the one this vpatch's patch set is in and a carry writes: a
    carry run from another clone wrote into this one."""
    here = (here or Path.cwd()).resolve()
    for d in [here, *here.parents]:
        if (d / "pyproject.toml").is_file() and (d / data / "VERSIONS.lock").is_file():
            if d != root.resolve():
                raise ConfigError(
                    f"this vpatch carries the checkout {root}, but you are in another one, {d}: "
                    f"run that checkout's own vpatch, or carry from {root}; nothing was touched"
                )
            return
