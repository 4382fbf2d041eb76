"""The download cache: <cache>/downloads/<file name>, filled from the
package index and checked against VERSIONS.lock's sha256.

A download streams to a temporary name beside its destination, is
sha256-checked, then renamed: a file under its own name was verified once.
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import IntegrityError, NetworkError, disk_error
from ..lock import Artifact
from .index import IndexFile
from .index import files as index_files

CHUNK = 1 << 20
Say = Callable[[str], None]


def quiet(_: str) -> None:
    """A `say` that says nothing."""


def cache_dir() -> Path:
    root = os.environ.get("VPATCH_CACHE") or Path.home() / ".cache" / "vpatch"
    return Path(root)


def downloads() -> Path:
    return cache_dir() / "downloads"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def cached(artifact: Artifact) -> Path | None:
    """The verified cached file, or None. A stamp beside the file records the
    hash it was verified against, so warm runs do not re-hash 500 MB wheels."""
    path = downloads() / artifact.filename
    stamp = path.with_name(path.name + ".sha256")
    if not path.is_file():
        return None
    if stamp.is_file() and stamp.read_text().split() == [artifact.sha256, str(path.stat().st_size)]:
        return path
    if sha256_file(path) == artifact.sha256:
        stamp.write_text(f"{artifact.sha256} {path.stat().st_size}\n")
        return path
    return None


def index_file(artifact: Artifact) -> IndexFile:
    """Where the package index serves the artifact."""
    found = index_files(artifact.project).get(artifact.filename)
    if found is None:
        raise NetworkError(f"the package index has no file {artifact.filename}")
    return found


def download(artifact: Artifact, offline: bool = False, say: Say = quiet) -> Path:
    """The artifact from the cache, downloading and verifying it if needed."""
    hit = cached(artifact)
    if hit:
        return hit
    if offline:
        raise NetworkError(
            f"{artifact.filename} is not in the cache ({downloads()}) "
            "and --offline was given; run once without --offline"
        )
    found = index_file(artifact)
    dest = downloads() / artifact.filename
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise disk_error(e, "cannot make the download cache") from None
    fetch_verified(found.url, dest, artifact.sha256, artifact.size or found.size, say)
    dest.with_name(dest.name + ".sha256").write_text(f"{artifact.sha256} {dest.stat().st_size}\n")
    return dest


def fetch_verified(url: str, dest: Path, sha256: str, size: int = 0, say: Say = quiet) -> None:
    """Stream url to a temporary name beside dest, check sha256, then rename.
    A mismatch (or any failure, Ctrl-C included) deletes the partial file:
    nothing unverified ever has the file's own name."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    h = hashlib.sha256()
    try:
        try:
            resp = urllib.request.urlopen(url, timeout=120)
        except OSError as e:  # URLError, refused, timed out
            raise NetworkError(f"download of {dest.name} failed: {e}") from None
        with resp:
            total = size or int(resp.headers.get("Content-Length") or 0)
            try:
                out = open(tmp, "wb")  # noqa: SIM115 - closed by the with below
            except OSError as e:
                raise disk_error(e, f"cannot write {dest.name}") from None
            with out:
                _copy(resp, out, h, total, dest.name, say)
        if h.hexdigest() != sha256:
            raise IntegrityError(
                f"{dest.name}: sha256 {h.hexdigest()} does not match the lock's {sha256}; "
                "the file was deleted (run `vpatch lock --refresh` if the index changed it)"
            )
        tmp.replace(dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _copy(resp: Any, out: BinaryIO, h: Any, total: int, name: str, say: Say) -> None:
    done, shown = 0, -1
    while True:
        try:
            chunk = resp.read(CHUNK)
        except OSError as e:
            raise NetworkError(f"download of {name} failed: {e}") from None
        if not chunk:
            return
        try:
            out.write(chunk)
        except OSError as e:
            raise disk_error(e, f"cannot write {name}") from None
        h.update(chunk)
        done += len(chunk)
        if total and (pct := done * 100 // total) // 10 != shown // 10:
            shown = pct
            say(f"  {name}: {pct:3d}% of {total / 1e6:.0f} MB")
