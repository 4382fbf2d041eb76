"""The one error hierarchy. The CLI catches `VpatchError` once and prints
`vpatch: error: <message>` with the class's exit code; nothing else prints
errors. Messages are one line and say what to do next.

Third-party errors become these where they enter vpatch (GitPython in
gitutil, zip and tar errors where archives are opened, HTTP where the index
is read); callers tell errors apart by type, never by message text."""

from __future__ import annotations

import errno
import os


class VpatchError(Exception):
    exit_code = 1
    kind = "failed"  # what the exit code means, in a command's --help


class ConfigError(VpatchError):
    """Bad input: unknown release, bad lock file, bad option."""

    exit_code = 2
    kind = "bad input"


class NetworkError(VpatchError):
    """The index or a remote could not be reached and nothing is cached."""

    exit_code = 3
    kind = "network"


class RangeUnsupported(NetworkError):
    """A server that does not honour HTTP range requests (a 200 instead of
    206, no `Accept-Ranges: bytes`, a short or oversized answer). Raised by
    the one range reader (network/httprange.py, and sources/lazy.py's
    checks); its callers catch it and fall back, as pip's lazy wheel does: to a full,
    hash-checked download of a pinned artifact, or to the start of a plain
    GET for doctor's headers. Should one escape, it is a network problem
    (exit 3)."""


class IntegrityError(VpatchError):
    """A download or checkout is not what the lock pins."""

    exit_code = 4
    kind = "not what the lock pins"


class PatchError(VpatchError):
    """A malformed patch, a series naming a missing file, a hunk that fails."""

    exit_code = 5
    kind = "a bad patch, or one that does not apply"


class TreeError(VpatchError):
    """The destination tree is dirty, has unknown commits, or is busy."""

    exit_code = 6
    kind = "the tree, folder or environment is refused"


class UnsafePathError(VpatchError):
    """An archive member, wheel member or patch would write outside the tree."""

    exit_code = 7
    kind = "an unsafe path"


class WheelError(VpatchError):
    """A wheel that cannot be read, rebuilt or verified."""

    exit_code = 8
    kind = "a bad wheel"


class RecordMismatch(WheelError):
    """A wheel's RECORD does not describe its members (listing, size, hash):
    verify-wheel reports it beside every other problem instead of stopping."""


class PreflightError(VpatchError):
    """The machine lacks a tool vpatch needs: git on PATH (every command that
    runs git), nvcc and the pinned torch (a source build)."""

    exit_code = 9
    kind = "a tool is missing"


class GitError(VpatchError):
    """A git operation failed in a way none of the above explains."""

    exit_code = 10
    kind = "git failed"


class NewerRelease(VpatchError):
    """The vLLM release is newer than the newest one vpatch's data knows: what
    vpatch would say of it is a guess (docs/maintaining.md: carry it)."""

    exit_code = 12
    kind = "vLLM is newer than vpatch knows"


class DiskError(VpatchError):
    """The file system refused: no space, read-only, permission, name too long."""

    exit_code = 11
    kind = "disk"


# what the file system said, in the words a user acts on
_ERRNO = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENAMETOOLONG: "file name too long",
    errno.ENOTDIR: "a path component is not a folder",
    errno.EISDIR: "is a folder",
    errno.ENOENT: "no such file or folder",
    errno.EEXIST: "already exists",
}


def disk_error(e: OSError, doing: str = "") -> DiskError:
    """An OSError as a one-line DiskError naming the path and the cause."""
    if not e.errno:  # OSError("message"), shutil.Error: no errno to explain
        why = str(e.args[0]) if e.args else type(e).__name__
    else:
        why = _ERRNO.get(e.errno) or e.strerror or os.strerror(e.errno)
    where = e.filename if e.filename is not None else ""
    head = f"{doing}: " if doing else ""
    return DiskError(f"{head}{where}{': ' if where else ''}{why}")
