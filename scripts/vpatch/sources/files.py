"""The few files of a release that the matrix, lint and `vpatch pr` read:
the files a series touches and its probes name, read as members of the
cached sdist or wheel once and kept under <cache>/files/<artifact sha256>/,
so warm runs never open an archive."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path, PurePosixPath

from .. import probes
from ..errors import IntegrityError, disk_error
from ..lock import Release
from ..paths import safe_relpath
from . import resolve
from .cache import Say, cache_dir, download, quiet
from .extract import ARCHIVE_ERRORS, open_zip


def release_files(
    release: Release, globs: set[str], offline: bool = False, say: Say = quiet
) -> Path:
    """A folder holding the release's files matching globs (paths or globs
    whose `*` stays in one folder), read from its sdist or wheel once and
    cached by the artifact's sha256."""
    kind = resolve(release, "auto")
    art = release.artifact(kind)
    home = cache_dir() / "files" / art.sha256
    manifest = home / "manifest.json"
    try:
        seen = json.loads(manifest.read_text()) if manifest.is_file() else {}
    except ValueError:
        seen = {}  # a damaged manifest: read the archive again
    todo = sorted(set(globs) - set(seen))
    if not todo:
        return home / "tree"
    found = _read_members(download(art, offline, say), kind, todo)
    try:
        for rel, (data, mode) in found.items():
            _write(home / "tree" / rel, data, mode)
        for g in todo:
            seen[g] = sorted(r for r in found if probes.matches(r, g))
        home.mkdir(parents=True, exist_ok=True)
        tmp = manifest.with_name(f".manifest.{os.getpid()}")
        tmp.write_text(json.dumps(seen, indent=1, sort_keys=True))
        tmp.replace(manifest)
    except OSError as e:
        raise disk_error(e, "cannot write the file cache") from None
    return home / "tree"


def _read_members(archive: Path, kind: str, globs: list[str]) -> dict[str, tuple[bytes, int]]:
    """{relative path: (bytes, mode)} of the members matching globs; an sdist's
    top folder is stripped."""
    out = {}
    what = archive.name

    def wanted(rel: str) -> bool:
        return any(probes.matches(rel, g) for g in globs)

    try:
        if kind == "sdist":
            with tarfile.open(archive, "r|gz") as tar:  # one pass, no index
                for m in tar:
                    parts = PurePosixPath(m.name).parts
                    rel = "/".join(parts[1:])
                    if m.isfile() and len(parts) > 1 and wanted(rel):
                        safe_relpath(rel, what)
                        f = tar.extractfile(m)
                        assert f is not None  # a regular file has data
                        out[rel] = (f.read(), m.mode)
            return out
        with open_zip(archive) as zf:
            for info in zf.infolist():
                if not info.is_dir() and wanted(info.filename):
                    safe_relpath(info.filename, what)
                    out[info.filename] = (zf.read(info), (info.external_attr >> 16) or 0o644)
    except ARCHIVE_ERRORS as e:
        raise IntegrityError(f"{what} cannot be read: {e}") from None
    return out


def _write(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    tmp.chmod(0o755 if mode & 0o111 else 0o644)  # git records only the x bit
    tmp.replace(path)
