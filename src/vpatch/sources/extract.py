"""Writing a release's source tree out of its archive: an sdist (tar.gz),
a wheel's Python files (from the cache, or read member by member with HTTP
range requests), or a local folder. Every member is checked before anything
is written: nothing may land outside the destination."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import IO

from .. import record
from ..errors import ConfigError, IntegrityError, UnsafePathError, disk_error
from ..lock import Artifact
from ..paths import check_link, safe_relpath
from .cache import CHUNK, index_file
from .lazy import RangeFile

# what reading a damaged archive raises, besides BadZipFile / TarError
ARCHIVE_ERRORS = (zipfile.BadZipFile, tarfile.TarError, gzip.BadGzipFile, zlib.error, EOFError)
# An sdist's tar is decompressed once, into memory up to this size (vLLM
# 0.33.0's: 154 MB), else a temporary file.
SPOOL = 256 * 1024 * 1024


def open_zip(path: Path) -> zipfile.ZipFile:
    """A zip archive, or IntegrityError (a cached artifact that is no zip
    does not have the bytes the lock pins)."""
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (*ARCHIVE_ERRORS, ValueError) as e:
        raise IntegrityError(f"{path.name} is not a valid zip file: {e}") from None
    except OSError as e:
        raise disk_error(e, "cannot read an archive") from None


def tar_member(m: tarfile.TarInfo, strip: str, what: str) -> PurePosixPath | None:
    """Where an sdist's member goes under the destination (its top folder
    `strip` stripped; None for the top folder itself), or UnsafePathError:
    outside the top folder, a link pointing out, not a file, folder or link."""
    parts = PurePosixPath(m.name).parts
    if not parts or parts[0] != strip:
        safe_relpath(m.name, what)  # absolute or '..' first: clearer message
        raise UnsafePathError(f"{what}: member {m.name!r} is outside {strip}/")
    if len(parts) == 1:
        return None
    rel = safe_relpath("/".join(parts[1:]), what)
    if m.issym() or m.islnk():
        target = m.linkname
        if m.islnk():  # hard links name a member path, strip it too
            target_parts = PurePosixPath(m.linkname).parts
            target = "/".join(target_parts[1:]) if target_parts[:1] == (strip,) else "/"
            safe_relpath(target, what)
        else:
            check_link(Path("."), rel, target, what)
    elif not (m.isfile() or m.isdir()):
        raise UnsafePathError(f"{what}: member {m.name!r} is not a file or folder")
    return rel


def _check_tar(
    tar: tarfile.TarFile, strip: str, what: str
) -> list[tuple[tarfile.TarInfo, PurePosixPath]]:
    plan = []
    for m in tar.getmembers():
        rel = tar_member(m, strip, what)
        if rel is not None:
            plan.append((m, rel))
    return plan


def extract_sdist(archive: Path, dest: Path, top: str) -> None:
    """Unpack an sdist whose members live under `top/` into dest (stripped)."""
    what = archive.name
    try:
        # tarfile reading a .tar.gz seeks back to the start to extract what
        # it listed, decompressing it twice (2.3 s of 0.33.0's 5.4 s): the tar
        # is decompressed once, and read from there
        with tempfile.SpooledTemporaryFile(SPOOL) as spool:
            with gzip.open(archive) as gz:
                shutil.copyfileobj(gz, spool, CHUNK)
            spool.seek(0)
            _extract_tar(spool, dest, top, what)
    except ARCHIVE_ERRORS as e:
        why = str(e).splitlines()[0].rstrip(": ") if str(e) else type(e).__name__
        raise IntegrityError(f"{what} is not a readable tar.gz archive ({why})") from None
    except OSError as e:
        raise disk_error(e, f"cannot unpack {what}") from None


def _extract_tar(fileobj: IO[bytes], dest: Path, top: str, what: str) -> None:
    with tarfile.open(fileobj=fileobj, mode="r:") as tar:
        plan = _check_tar(tar, top, what)  # every member checked before any write
        for m, rel in plan:
            m.name = str(rel)
            if m.islnk():
                m.linkname = str(PurePosixPath(*PurePosixPath(m.linkname).parts[1:]))
            tar.extract(m, dest, filter="data")


def _is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def wheel_members(zf: zipfile.ZipFile, what: str) -> list[tuple[zipfile.ZipInfo, PurePosixPath]]:
    """The members of a wheel that make up a Python source tree: everything but
    compiled extension modules and the .dist-info / .data metadata."""
    plan = []
    for info in zf.infolist():
        rel = safe_relpath(info.filename, what)
        if _is_link(info):
            raise UnsafePathError(f"{what}: member {info.filename!r} is a symlink")
        top = rel.parts[0]
        if info.is_dir() or top.endswith((".dist-info", ".data")):
            continue
        if rel.suffix in (".so", ".pyd") or ".so." in rel.name:
            continue
        plan.append((info, rel))
    return plan


def extract_wheel(wheel: Path, dest: Path) -> None:
    what = wheel.name
    with open_zip(wheel) as zf:
        plan = wheel_members(zf, what)
        try:
            for info, rel in plan:
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, CHUNK)
        except ARCHIVE_ERRORS as e:
            raise IntegrityError(f"{what}: a member cannot be read: {e}") from None
        except OSError as e:
            raise disk_error(e, f"cannot unpack {what}") from None


def record_member(zf: zipfile.ZipFile, what: str) -> zipfile.ZipInfo:
    rows = [i for i in zf.infolist() if i.filename.endswith(".dist-info/RECORD")]
    if len(rows) != 1:
        raise IntegrityError(f"{what}: expected one .dist-info/RECORD, found {len(rows)}")
    return rows[0]


def local_record_sha256(wheel: Path) -> str:
    """sha256 of a (cached, verified) wheel's RECORD."""
    with open_zip(wheel) as zf:
        try:
            return hashlib.sha256(zf.read(record_member(zf, wheel.name))).hexdigest()
        except ARCHIVE_ERRORS as e:
            raise IntegrityError(f"{wheel.name}: RECORD cannot be read: {e}") from None


def record_sha256(url: str, size: int) -> str:
    """sha256 of a remote wheel's RECORD, read with range requests
    (RangeUnsupported when the server does not honour them)."""
    name = url.rsplit("/", 1)[-1]
    try:
        with zipfile.ZipFile(RangeFile(url, size)) as zf:
            return hashlib.sha256(zf.read(record_member(zf, name))).hexdigest()
    except ARCHIVE_ERRORS as e:
        raise IntegrityError(f"{name} is not a valid zip file: {e}") from None


def verified_record(
    zf: zipfile.ZipFile, rec: zipfile.ZipInfo, artifact: Artifact
) -> dict[str, str]:
    """{member: hash} of a remote wheel's RECORD, which must have the lock's
    record_sha256 (IntegrityError otherwise); what anchors trust in a wheel
    read by ranges. RecordError and archive errors are the caller's."""
    data = zf.read(rec)
    if hashlib.sha256(data).hexdigest() != artifact.record_sha256:
        raise IntegrityError(
            f"{artifact.filename}: RECORD does not match the lock's record_sha256; "
            "nothing was written"
        )
    return {r.path: r.hash for r in record.parse(data)}


def extract_wheel_lazy(artifact: Artifact, dest: Path) -> int:
    """Like extract_wheel, but reading only the needed members of the remote
    wheel (HTTP range requests). Trust is anchored in the lock: RECORD must
    have the pinned sha256, and every member the sha256 RECORD gives it.
    Returns the bytes fetched."""
    what = artifact.filename
    found = index_file(artifact)
    remote = RangeFile(found.url, found.size)
    try:
        zf = zipfile.ZipFile(remote)
    except ARCHIVE_ERRORS as e:
        raise IntegrityError(f"{what} is not a valid zip file: {e}") from None
    with zf:
        plan = wheel_members(zf, what)  # every member checked before any write
        rec = record_member(zf, what)
        # a local header is 30 bytes + name + extra: 1 KB covers it
        spans = [(i.header_offset, i.header_offset + 1024 + i.compress_size) for i, _ in plan]
        remote.prefetch([*spans, (rec.header_offset, rec.header_offset + 1024 + rec.compress_size)])
        try:
            hashes = verified_record(zf, rec, artifact)
            files = []
            for info, rel in plan:
                member = zf.read(info)
                spec = hashes.get(info.filename, "")
                if not spec.startswith("sha256=") or not record.check(member, spec):
                    raise IntegrityError(f"{what}: {info.filename} does not match its RECORD hash")
                files.append((rel, member))
        except ARCHIVE_ERRORS as e:
            raise IntegrityError(f"{what}: a member cannot be read: {e}") from None
        except record.RecordError as e:
            raise IntegrityError(f"{what}: {e}") from None
    try:
        for rel, member in files:  # written only once every member checked out
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(member)
    except OSError as e:
        raise disk_error(e, f"cannot unpack {what}") from None
    return remote.fetched


def copy_folder(src: Path, dest: Path) -> None:
    """Copy a local folder (without its .git); symlinks must stay inside."""
    if not src.is_dir():
        raise ConfigError(f"--source {src}: no such folder")
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            p = Path(root, name)
            if p.is_symlink():
                rel = PurePosixPath(p.relative_to(src).as_posix())
                check_link(src, rel, os.readlink(p), str(src))
    try:
        shutil.copytree(
            src, dest, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git")
        )
    except shutil.Error as e:  # several files failed; the first says why
        raise ConfigError(f"cannot copy --source {src}: {e.args[0][0][2]}") from None
    except OSError as e:
        raise disk_error(e, f"cannot copy --source {src}") from None
