"""The few files of a release that the matrix, lint and `vpatch pr` read:
the files a series touches and its probes name, read as members of the
cached sdist or wheel once and kept under <cache>/files/<artifact sha256>/,
so warm runs never open an archive.

<cache>/files/<sha256>/manifest.json records, per glob asked for, the files
it matched, and each file's sha256; every use hashes the files (a few small
ones) against it, and a file that is missing or differs has the tree read
again from the (verified) archive."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

from .. import probes
from ..errors import IntegrityError, disk_error
from ..lock import Release
from ..paths import safe_relpath, sweep, tmp_path, write_atomic
from . import resolve
from .cache import Say, cache_dir, download, quiet, sha256_file
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
    tree, manifest = home / "tree", home / "manifest.json"
    try:
        seen, sums = _load(manifest)
        if sums and not _intact(tree, sums):
            say(f"{tree}: a cached file of vLLM {release.version} is damaged; reading it again")
            shutil.rmtree(tree, ignore_errors=True)
            manifest.unlink(missing_ok=True)
            globs = set(globs) | set(seen)
            seen, sums = {}, {}
    except OSError as e:
        raise disk_error(e, "cannot read the file cache") from None
    series = sorted(set(globs) - set(seen))
    if not series:
        return tree
    found = _read_members(download(art, offline, say), kind, series)
    try:
        for rel, (data, mode) in found.items():
            _write(tree / rel, data, mode)
            sums[rel] = _sha256(data)
        for g in series:
            seen[g] = sorted(r for r in found if probes.matches(r, g))
        home.mkdir(parents=True, exist_ok=True)
        sweep(home)
        doc = {"globs": seen, "files": sums}
        write_atomic(manifest, json.dumps(doc, indent=1, sort_keys=True).encode())
    except OSError as e:
        raise disk_error(e, "cannot write the file cache") from None
    return tree


def _load(manifest: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(glob -> files, file -> sha256) of a manifest; empty when there is
    none, it is damaged, or it predates the sha256s (read again)."""
    try:
        doc: Any = json.loads(manifest.read_text())
    except FileNotFoundError:
        return {}, {}
    except (ValueError, UnicodeDecodeError):
        return {}, {}
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
        return {}, {}
    globs, files = doc.get("globs"), doc["files"]
    if not isinstance(globs, dict) or not all(isinstance(v, str) for v in files.values()):
        return {}, {}
    listed = {r for rs in globs.values() if isinstance(rs, list) for r in rs}
    if not listed <= set(files):
        return {}, {}
    return globs, files


def _intact(tree: Path, sums: dict[str, str]) -> bool:
    for rel, want in sums.items():
        try:
            if sha256_file(tree / rel) != want:
                return False
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return False
    return True


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
    sweep(path.parent)
    tmp = tmp_path(path)
    try:
        tmp.write_bytes(data)
        tmp.chmod(0o755 if mode & 0o111 else 0o644)  # git records only the x bit
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
