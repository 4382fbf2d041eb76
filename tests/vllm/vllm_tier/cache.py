"""The tier's folder in vpatch's cache, and folders built once per key.

A built folder carries a stamp, ``.vpatch-stamp``, holding the key it was built
from (a hash of its inputs); a rerun with the same key is instant and a change
rebuilds only what it touches. Downloads are vpatch's (``<cache>/downloads``,
checked against VERSIONS.lock by vpatch.sources)."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from vpatch.sources import cache as sources

from . import TierError
from .log import locked, say

STAMP = ".vpatch-stamp"
# A sibling is pruned only when no run has used it for this long: checkouts
# that share the cache (worktrees whose vpatch code differs, so their
# patched installs have other keys) run side by side, and pruning at once
# deleted an install under another checkout's running tier.
STALE = 24 * 3600


def root() -> Path:
    """``$VPATCH_CACHE/vllm-tier`` (vpatch's cache, ``~/.cache/vpatch`` by default)."""
    return sources.cache_dir().expanduser().resolve() / "vllm-tier"


def stamp(folder: Path) -> str | None:
    try:
        return (folder / STAMP).read_text().strip()
    except OSError:
        return None


def _unused(folder: Path) -> bool:
    try:
        return time.time() - (folder / STAMP).stat().st_mtime > STALE
    except OSError:  # no stamp: an interrupted build, or not ours
        return True


def built(
    dest: Path,
    key: str,
    make: Callable[[Path], None],
    what: str,
    *,
    in_place: bool = False,
    prune: str | None = None,
) -> Path:
    """``dest``, made by ``make(folder)`` unless its stamp already says ``key``.

    The folder is made beside ``dest`` and renamed into place, so an interrupted
    build leaves nothing that looks finished; ``in_place`` builds at ``dest``
    itself (a venv cannot be moved) and stamps it last. ``prune`` is a glob of
    siblings (older keys of the same thing) to delete after a build, those no
    one used for STALE seconds: each use touches the stamp."""
    if stamp(dest) == key:
        with contextlib.suppress(OSError):  # a folder of a read-only shared cache
            (dest / STAMP).touch()
        return dest
    if dest.is_symlink():  # a folder shared from another cache: use it, never rebuild it
        raise TierError(f"{dest} links to {dest.resolve()}, built for another key; not rebuilt")
    with locked(root() / "locks" / dest.relative_to(root()).as_posix().replace("/", "--")):
        if stamp(dest) == key:
            return dest
        say(f"making {what} at {dest}")
        t0 = time.monotonic()
        work = dest if in_place else dest.with_name(dest.name + ".tmp")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        make(work)
        say(f"made {dest.relative_to(root())} in {time.monotonic() - t0:.0f}s")
        (work / STAMP).write_text(key + "\n")
        if not in_place:
            shutil.rmtree(dest, ignore_errors=True)
            work.rename(dest)
        if prune:
            for old in dest.parent.glob(prune):
                if old != dest and not old.name.endswith(".tmp") and _unused(old):
                    shutil.rmtree(old, ignore_errors=True)
    return dest
