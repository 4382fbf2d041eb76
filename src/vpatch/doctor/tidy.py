"""What a failed hub read takes back from the Hugging Face cache.

huggingface_hub makes, for a file it fetches, the repo's folders, a ref
(refs/<revision>), a lock (.locks/), a partial download (blobs/*.incomplete)
and, for a file that is not there, a marker (.no_exist/); the file itself is
a blob and a link to it in snapshots/<commit>/. A read that fails leaves the
cache as it found it but for whole files: a config fetched before the
failure stays, where vLLM finds it, with the ref that names its commit;
everything else this read made goes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from . import deadline


@contextlib.contextmanager
def tidy(cache: Path, repo: str) -> Iterator[None]:
    """A fetch that fails leaves the cache as it found it but for whole files
    (a config fetched before the failure stays, where vLLM finds it): the
    refs, .no_exist markers, locks, partial downloads and folders
    huggingface_hub made for it go."""
    folder = "models--" + repo.replace("/", "--")
    roots = (cache / folder, cache / ".locks" / folder)
    before = _paths(cache, roots)

    def undo() -> None:
        _undo(cache, roots, before)

    # a read stopped while stuck in a socket never gets here: the main thread undoes it
    with deadline.on_stop(undo):
        try:
            yield
        except BaseException:
            undo()
            raise


def _paths(cache: Path, roots: tuple[Path, ...]) -> set[Path]:
    """What is under the roots (walked as the read itself may be removing it)."""
    found = {p for p in (cache, cache / ".locks", cache / "CACHEDIR.TAG") if p.exists()}
    for root in roots:
        if root.exists():
            found.add(root)
            for top, dirs, files in os.walk(root):
                found |= {Path(top, n) for n in (*dirs, *files)}
    return found


def _undo(cache: Path, roots: tuple[Path, ...], before: set[Path]) -> None:
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
    # the cache's own entries, when this run made them: .locks when empty, the
    # rest when the cache holds nothing else (the other model is fetched beside)
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
