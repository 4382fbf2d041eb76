"""The download cache: <cache>/downloads/<file name>, filled from the
package index and checked against VERSIONS.lock's sha256.

Trust comes from the bytes, never from a stamp: every use of a cached file
hashes it in full (hashlib.file_digest; on this machine ~0.05 s for a 31 MB
sdist, ~0.65 s for a 509 MB wheel: docs/measurements.md), once per use. A file
whose bytes do not have the lock's sha256 is deleted and downloaded again
(with --offline: IntegrityError). A download streams to a temporary name
beside its destination (paths.tmp_path), is sha256-checked while it streams,
then renamed; the temporary files of killed runs are removed, never used.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import IntegrityError, NetworkError, disk_error
from ..lock import Artifact
from ..network.session import HTTP_ERRORS, whole
from ..paths import sweep, tmp_path
from .index import IndexFile, open_url
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
    """sha256 of a file (OSError is the caller's)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def cached(artifact: Artifact, say: Say = quiet, offline: bool = False) -> Path | None:
    """The cached file, when its bytes have the lock's sha256 (hashed in full,
    now); else None, and the caller downloads it again (or reads what it
    needs with range requests). A cached file with other bytes is deleted
    and said so in one line; with `offline` that is an IntegrityError
    instead, as nothing can replace it. Temporary files of killed downloads
    are removed."""
    path = downloads() / artifact.filename
    try:
        sweep(path.parent)
        # vpatch <= 0.1 trusted a `<file>.sha256` stamp instead of the bytes
        path.with_name(path.name + ".sha256").unlink(missing_ok=True)
        got = sha256_file(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise disk_error(e, "cannot read the download cache") from None
    if got == artifact.sha256:
        return path
    try:
        path.unlink(missing_ok=True)
    except OSError as e:
        raise disk_error(e, "cannot remove a damaged file from the download cache") from None
    damaged = (
        f"{path}: the cached file is damaged (sha256 {got[:12]}..., "
        f"the lock pins {artifact.sha256[:12]}...); deleted it"
    )
    if offline:
        raise IntegrityError(f"{damaged}; run once without --offline to download it again")
    say(damaged)
    return None


def index_file(artifact: Artifact) -> IndexFile:
    """Where the package index serves the artifact."""
    found = index_files(artifact.project).get(artifact.filename)
    if found is None:
        raise NetworkError(f"the package index has no file {artifact.filename}")
    return found


def download(artifact: Artifact, offline: bool = False, say: Say = quiet) -> Path:
    """The artifact from the cache (verified), else from the index (verified
    while it streams): its bytes are hashed once either way."""
    return cached(artifact, say, offline) or from_index(artifact, offline, say)


def from_index(artifact: Artifact, offline: bool = False, say: Say = quiet) -> Path:
    """Download the artifact into the cache, without looking there first
    (the caller did: `cached`)."""
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
    return dest


def fetch_verified(url: str, dest: Path, sha256: str, size: int = 0, say: Say = quiet) -> None:
    """Stream url to a temporary name beside dest, check sha256, then rename.
    A mismatch (or any failure, Ctrl-C included) deletes the partial file:
    nothing unverified ever has the file's own name."""
    tmp = tmp_path(dest, "part")
    h = hashlib.sha256()
    try:
        resp = open_url(url, f"download of {dest.name} failed")
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
        try:
            tmp.replace(dest)
        except OSError as e:
            raise disk_error(e, f"cannot write {dest.name}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _copy(resp: Any, out: BinaryIO, h: Any, total: int, name: str, say: Say) -> None:
    done, shown = 0, -1
    while True:
        try:
            chunk = resp.read(CHUNK)
        except HTTP_ERRORS as e:
            raise NetworkError(f"download of {name} failed: {e}") from None
        if not chunk:
            whole(resp, done, f"download of {name}")  # broke off: not a mismatch, try again
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
