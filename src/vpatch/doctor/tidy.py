"""What a failed hub read takes back from the Hugging Face cache.

huggingface_hub makes, for a file it fetches, the repo's folders, a ref
(refs/<revision>), a lock (.locks/), a partial download (blobs/*.incomplete)
and, for a file that is not there, a marker (.no_exist/); the file itself is
a blob and a link to it in snapshots/<commit>/. A read that fails leaves the
cache as it found it but for whole files: a config fetched before the
failure stays, where vLLM finds it, with the ref that names its commit;
everything else this read made goes.

The target and the drafter are read at once, into one cache: a read that
fails takes back its own repo's files, and the cache's own entries (its
folder, .locks, CACHEDIR.TAG) only when no other read of this process is
running there (one removed the cache folder while the other was making
its repo folder in it: FileNotFoundError, exit 11). A read stopped by the
deadline or Ctrl-C counts as done.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..network import deadline


@dataclass(eq=False)
class _Read:
    cache: Path
    root: Path  # the repo's folder in the cache
    budget: deadline.Budget | None

    def running(self) -> bool:
        return self.budget is None or not self.budget.stopped.is_set()


_ACTIVE: list[_Read] = []  # the reads under tidy now, in this process
_lock = threading.Lock()  # held while one is registered, leaves, or is undone


@contextlib.contextmanager
def tidy(cache: Path, repo: str) -> Iterator[None]:
    """A fetch that fails leaves the cache as it found it but for whole files
    (a config fetched before the failure stays, where vLLM finds it): the
    refs, .no_exist markers, locks, partial downloads and folders
    huggingface_hub made for it go."""
    folder = "models--" + repo.replace("/", "--")
    roots = (cache / folder, cache / ".locks" / folder)
    me = _Read(cache, roots[0], deadline.current())
    with _lock:
        _ACTIVE.append(me)
        before = _paths(cache, roots)

    def undo() -> None:
        with _lock:
            others = [r for r in _ACTIVE if r is not me and r.cache == cache and r.running()]
            if not any(r.root == me.root for r in others):
                _undo(cache, roots, before, cache_too=not others)

    try:
        # a read stopped while stuck in a socket never gets here: the main thread undoes it
        with deadline.on_stop(undo):
            try:
                yield
            except BaseException:
                undo()
                raise
    finally:
        with _lock:
            _ACTIVE.remove(me)


def _paths(cache: Path, roots: tuple[Path, ...]) -> set[Path]:
    """What is under the roots (walked as the read itself may be removing it)."""
    found = {p for p in (cache, cache / ".locks", cache / "CACHEDIR.TAG") if p.exists()}
    for root in roots:
        if root.exists():
            found.add(root)
            for top, dirs, files in os.walk(root):
                found |= {Path(top, n) for n in (*dirs, *files)}
    return found


def _undo(cache: Path, roots: tuple[Path, ...], before: set[Path], cache_too: bool) -> None:
    mine = {
        p for p in _paths(cache, roots) - before if any(r == p or r in p.parents for r in roots)
    }
    snapshots = roots[0] / "snapshots"
    keep = {p for p in mine if snapshots in p.parents and not p.is_dir() and p.is_file()}
    keep |= {p.resolve() for p in keep if p.is_symlink()}
    for ref in (p for p in mine if roots[0] / "refs" in p.parents and p.is_file()):
        with contextlib.suppress(OSError):
            if any(k for k in keep if (snapshots / ref.read_text().strip()) in k.parents):
                keep.add(ref)
    keep |= {q for k in keep for q in k.parents if q in mine}
    for p in sorted(mine - keep, key=lambda p: len(p.parts), reverse=True):
        _remove(p)
    # the cache's own entries, when this run made them and no other read is
    # making its files there: .locks when empty, the rest when the cache
    # holds nothing else
    if not cache_too:
        return
    if cache / ".locks" not in before:
        _remove(cache / ".locks")
    left = set(cache.iterdir()) if cache.is_dir() else set()
    if not left - {cache / "CACHEDIR.TAG"}:
        for p in (cache / "CACHEDIR.TAG", cache):
            if p not in before:
                _remove(p)


def _remove(p: Path) -> None:
    """A file, or a folder when empty."""
    with contextlib.suppress(OSError):
        if p.is_dir() and not p.is_symlink():
            p.rmdir()
        else:
            p.unlink()
