"""What a release's source tree holds, entry by entry, as `materialize`
writes it, without writing it: each relative path's kind (file, folder,
symlink), the owner's executable bit (all git keeps of a mode), and a
file's sha256 or a link's target. `vpatch apply --dest` compares a plain
folder with it (checkout._adopt): names first, so a folder that is not the
release is refused at its first stray or missing name, in milliseconds.

An sdist's or a cached wheel's listing is read from the (sha256-verified)
archive once and kept as <cache>/files/<artifact sha256>/entries.json
(written under a temporary name, then renamed: a killed run leaves nothing a
later run uses); a wheel that is not cached is listed from its RECORD, read
with range requests and checked against the lock's record_sha256; a local
folder (`--source PATH`) is read as it is. A `--source git` tree carries its
.git: no plain folder is one.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import IO, Any

from .. import record
from ..errors import ConfigError, IntegrityError, RangeUnsupported, disk_error
from ..lock import Release
from ..paths import check_link, sweep, write_atomic
from . import resolve
from .cache import Say, cache_dir, cached, download, from_index, index_file, quiet
from .extract import (
    ARCHIVE_ERRORS,
    open_zip,
    record_member,
    tar_member,
    verified_record,
    wheel_members,
)
from .lazy import RangeFile

# (kind, executable, sha256 of a file or target of a link), by relative path
Entry = tuple[str, bool, str]
Entries = dict[str, Entry]
FOLDER: Entry = ("folder", False, "")
CHUNK = 1 << 20


def entries(
    release: Release, source: str = "auto", offline: bool = False, say: Say = quiet
) -> Entries:
    """The entries of the release's source tree as --source gives it."""
    kind = resolve(release, source)
    if kind == "git":
        raise ConfigError("a --source git tree is a git checkout: a plain folder never is one")
    if kind not in ("sdist", "wheel", "cpu-wheel"):
        return folder_entries(Path(source).expanduser())
    art = release.artifact(kind)
    home = cache_dir() / "files" / art.sha256
    found = _load(home / "entries.json")
    if found is not None:
        return found
    if kind == "sdist":
        out = _sdist(download(art, offline, say), f"vllm-{release.version}")
    else:
        hit = cached(art, say, offline)
        if hit is None and art.record_sha256 and not offline:
            try:
                return _remote_wheel(release, kind)  # RECORD only: not worth a cache entry
            except RangeUnsupported as e:
                say(f"{e}; downloading the whole wheel instead")
        out = _wheel(hit or from_index(art, offline, say))
    try:
        home.mkdir(parents=True, exist_ok=True)
        sweep(home)
        write_atomic(home / "entries.json", json.dumps(out, sort_keys=True).encode())
    except OSError:
        pass  # a cache that cannot be written costs the next run a second read, no more
    return out


def _load(path: Path) -> Entries | None:
    try:
        doc: Any = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    out: Entries = {}
    for rel, e in doc.items():
        if not (isinstance(e, list) and len(e) == 3 and isinstance(e[0], str)):
            return None
        out[rel] = (e[0], bool(e[1]), str(e[2]))
    return out


def _with_parents(out: Entries) -> Entries:
    """Every folder an entry lies in is an entry too (extraction makes them)."""
    for rel in list(out):
        for parent in PurePosixPath(rel).parents:
            if str(parent) != ".":
                out.setdefault(str(parent), FOLDER)
    return out


def _sdist(archive: Path, top: str) -> Entries:
    """One streaming pass over the tar: what extract_sdist writes."""
    what = archive.name
    out: Entries = {}
    try:
        with tarfile.open(archive, "r|gz") as tar:
            for m in tar:
                rel = tar_member(m, top, what)
                if rel is None:
                    continue
                if m.isdir():
                    out[str(rel)] = FOLDER
                elif m.issym():
                    out[str(rel)] = ("symlink", False, m.linkname)
                elif m.islnk():  # the same file as the member it names: one inode,
                    target = "/".join(PurePosixPath(m.linkname).parts[1:])
                    if target in out:  # whose mode the link's member sets last
                        same = ("file", bool(m.mode & 0o100), out[target][2])
                        out[str(rel)] = out[target] = same
                else:
                    f = tar.extractfile(m)
                    assert f is not None  # a regular file has data
                    out[str(rel)] = ("file", bool(m.mode & 0o100), _sha256(f))
    except ARCHIVE_ERRORS as e:
        why = str(e).splitlines()[0].rstrip(": ") if str(e) else type(e).__name__
        raise IntegrityError(f"{what} is not a readable tar.gz archive ({why})") from None
    except OSError as e:
        raise disk_error(e, f"cannot read {what}") from None
    return _with_parents(out)


def _sha256(f: IO[bytes]) -> str:
    h = hashlib.sha256()
    while chunk := f.read(CHUNK):
        h.update(chunk)
    return h.hexdigest()


def _wheel(path: Path) -> Entries:
    """What extract_wheel writes: the members' bytes, never executable."""
    what = path.name
    out: Entries = {}
    with open_zip(path) as zf:
        try:
            for info, rel in wheel_members(zf, what):
                with zf.open(info) as f:
                    out[str(rel)] = ("file", False, _sha256(f))
        except ARCHIVE_ERRORS as e:
            raise IntegrityError(f"{what}: a member cannot be read: {e}") from None
        except OSError as e:
            raise disk_error(e, f"cannot read {what}") from None
    return _with_parents(out)


def _remote_wheel(release: Release, kind: str) -> Entries:
    """What extract_wheel_lazy writes, from the verified RECORD alone (it
    writes only members whose bytes have RECORD's hash)."""
    art = release.artifact(kind)
    what = art.filename
    found = index_file(art)
    try:
        with zipfile.ZipFile(RangeFile(found.url, found.size)) as zf:
            plan = wheel_members(zf, what)
            hashes = verified_record(zf, record_member(zf, what), art)
    except ARCHIVE_ERRORS as e:
        raise IntegrityError(f"{what} is not a valid zip file: {e}") from None
    except record.RecordError as e:
        raise IntegrityError(f"{what}: {e}") from None
    out: Entries = {}
    for info, rel in plan:
        spec = hashes.get(info.filename, "")
        if not spec.startswith("sha256="):
            raise IntegrityError(f"{what}: {info.filename} has no sha256 in its RECORD")
        digest = record.unb64(spec.removeprefix("sha256="))
        out[str(rel)] = ("file", False, digest.hex())
    return _with_parents(out)


def folder_entries(src: Path) -> Entries:
    """What copy_folder writes: src without its .git folders."""
    if not src.is_dir():
        raise ConfigError(f"--source {src}: no such folder")
    out: Entries = {}

    def fail(e: OSError) -> None:
        raise e

    try:
        for folder, dirs, files in os.walk(src, onerror=fail):
            dirs[:] = [d for d in dirs if d != ".git"]
            for name in dirs + [f for f in files if f != ".git"]:
                out[Path(folder, name).relative_to(src).as_posix()] = entry(Path(folder, name))
    except OSError as e:
        raise disk_error(e, f"cannot read --source {src}") from None
    for rel, (kind, _, target) in out.items():
        if kind == "symlink":
            check_link(src, PurePosixPath(rel), target, str(src))
    return out


def entry(p: Path, digest: bool = True) -> Entry:
    """One path's entry, as git would see it (a symlink is not followed, a
    fifo or device never opened); without `digest`, a file's sha256 is ''."""
    st = p.lstat()
    if stat.S_ISLNK(st.st_mode):
        return ("symlink", False, os.readlink(p))
    if stat.S_ISDIR(st.st_mode):
        return FOLDER
    if not stat.S_ISREG(st.st_mode):
        return ("special", False, "")
    sha = ""
    if digest:
        with open(p, "rb") as f:
            sha = hashlib.file_digest(f, "sha256").hexdigest()
    return ("file", bool(st.st_mode & 0o100), sha)
