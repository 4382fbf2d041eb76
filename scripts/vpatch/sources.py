"""Where a release's source tree comes from, and the download cache.

Providers (`--source`): sdist, wheel (the Python files of the official
wheel: 0.15.x has no sdist), cpu-wheel, git (a tag checkout), or a local
folder. Every provider writes into an empty destination and refuses, before
writing anything, a member that would land outside it.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import shutil
import stat
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

from . import gitutil, index, lazy
from .errors import ConfigError, IntegrityError, NetworkError, UnsafePathError
from .lock import Artifact, Release
from .paths import check_link, safe_relpath

VLLM_REMOTE = "https://github.com/vllm-project/vllm.git"
SOURCES = ("auto", "sdist", "wheel", "cpu-wheel", "git")
CHUNK = 1 << 20


def cache_dir() -> Path:
    root = os.environ.get("VPATCH_CACHE") or Path.home() / ".cache" / "vpatch"
    return Path(root)


# -- downloads -------------------------------------------------------------


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def cached(artifact: Artifact) -> Path | None:
    """The verified cached file, or None. A stamp beside the file records the
    hash it was verified against, so warm runs do not re-hash 500 MB wheels."""
    path = cache_dir() / "downloads" / artifact.filename
    stamp = path.with_name(path.name + ".sha256")
    if not path.is_file():
        return None
    if stamp.is_file() and stamp.read_text().split() == [artifact.sha256, str(path.stat().st_size)]:
        return path
    if sha256_file(path) == artifact.sha256:
        stamp.write_text(f"{artifact.sha256} {path.stat().st_size}\n")
        return path
    return None


def index_file(artifact: Artifact) -> index.IndexFile:
    """Where the package index serves the artifact."""
    found = index.files(artifact.project).get(artifact.filename)
    if found is None:
        raise NetworkError(f"the package index has no file {artifact.filename}")
    return found


def download(artifact: Artifact, offline: bool = False, progress: bool = True) -> Path:
    """The artifact from the cache, downloading and verifying it if needed."""
    hit = cached(artifact)
    if hit:
        return hit
    if offline:
        raise NetworkError(
            f"{artifact.filename} is not in the cache ({cache_dir() / 'downloads'}) "
            "and --offline was given; run once without --offline"
        )
    found = index_file(artifact)
    dest = cache_dir() / "downloads" / artifact.filename
    dest.parent.mkdir(parents=True, exist_ok=True)
    fetch_verified(found.url, dest, artifact.sha256, artifact.size or found.size, progress)
    dest.with_name(dest.name + ".sha256").write_text(f"{artifact.sha256} {dest.stat().st_size}\n")
    return dest


def fetch_verified(url: str, dest: Path, sha256: str, size: int = 0, progress=True) -> None:
    """Stream url to a temporary name beside dest, check sha256, then rename.
    A mismatch deletes the partial file: nothing unverified stays in the cache."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    h = hashlib.sha256()
    done = 0
    shown = -1
    try:
        with urllib.request.urlopen(url, timeout=120) as resp, open(tmp, "wb") as out:
            total = size or int(resp.headers.get("Content-Length") or 0)
            while chunk := resp.read(CHUNK):
                out.write(chunk)
                h.update(chunk)
                done += len(chunk)
                if progress and total:
                    pct = done * 100 // total
                    if pct // 10 != shown // 10:
                        shown = pct
                        print(
                            f"  {dest.name}: {pct:3d}% of {total / 1e6:.0f} MB",
                            file=sys.stderr,
                            flush=True,
                        )
    except (urllib.error.URLError, OSError) as e:
        tmp.unlink(missing_ok=True)
        raise NetworkError(f"download of {dest.name} failed: {e}") from None
    if h.hexdigest() != sha256:
        tmp.unlink(missing_ok=True)
        raise IntegrityError(
            f"{dest.name}: sha256 {h.hexdigest()} does not match the lock's {sha256}; "
            "the file was deleted (run `vpatch lock --refresh` if the index changed it)"
        )
    tmp.replace(dest)


# -- extraction ------------------------------------------------------------


def _check_tar(tar: tarfile.TarFile, strip: str, what: str) -> list[tuple]:
    plan = []
    for m in tar.getmembers():
        parts = PurePosixPath(m.name).parts
        if not parts or parts[0] != strip:
            safe_relpath(m.name, what)  # absolute or '..' first: clearer message
            raise UnsafePathError(f"{what}: member {m.name!r} is outside {strip}/")
        if len(parts) == 1:
            continue
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
        plan.append((m, rel))
    return plan


def extract_sdist(archive: Path, dest: Path, top: str) -> None:
    """Unpack an sdist whose members live under `top/` into dest (stripped)."""
    what = archive.name
    with tarfile.open(archive) as tar:
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
    try:
        zf = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile:
        raise IntegrityError(f"{what} is not a valid zip file") from None
    with zf:
        plan = wheel_members(zf, what)
        for info, rel in plan:
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, CHUNK)


def _record(zf: zipfile.ZipFile, what: str) -> zipfile.ZipInfo:
    rows = [i for i in zf.infolist() if i.filename.endswith(".dist-info/RECORD")]
    if len(rows) != 1:
        raise IntegrityError(f"{what}: expected one .dist-info/RECORD, found {len(rows)}")
    return rows[0]


def record_sha256(url: str, size: int) -> str:
    """sha256 of a remote wheel's RECORD, read with range requests."""
    with zipfile.ZipFile(lazy.RangeFile(url, size)) as zf:
        return hashlib.sha256(zf.read(_record(zf, url.rsplit("/", 1)[-1]))).hexdigest()


def extract_wheel_lazy(artifact: Artifact, dest: Path) -> int:
    """Like extract_wheel, but reading only the needed members of the remote
    wheel (HTTP range requests). Trust is anchored in the lock: RECORD must
    have the pinned sha256, and every member the sha256 RECORD gives it.
    Returns the bytes fetched."""
    what = artifact.filename
    found = index_file(artifact)
    remote = lazy.RangeFile(found.url, found.size)
    try:
        zf = zipfile.ZipFile(remote)
    except zipfile.BadZipFile:
        raise IntegrityError(f"{what} is not a valid zip file") from None
    with zf:
        plan = wheel_members(zf, what)  # every member checked before any write
        rec = _record(zf, what)
        # a local header is 30 bytes + name + extra: 1 KB covers it
        spans = [(i.header_offset, i.header_offset + 1024 + i.compress_size) for i, _ in plan]
        remote.prefetch([*spans, (rec.header_offset, rec.header_offset + 1024 + rec.compress_size)])
        record = zf.read(rec)
        if hashlib.sha256(record).hexdigest() != artifact.record_sha256:
            raise IntegrityError(
                f"{what}: RECORD does not match the lock's record_sha256; nothing was written"
            )
        hashes = {row[0]: row[1] for row in csv.reader(record.decode().splitlines()) if row}
        files = []
        for info, rel in plan:
            data = zf.read(info)
            algo, _, want = hashes.get(info.filename, "").partition("=")
            got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if algo != "sha256" or got != want:
                raise IntegrityError(f"{what}: {info.filename} does not match its RECORD hash")
            files.append((rel, data))
    for rel, data in files:  # written only once every member checked out
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
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
    shutil.copytree(
        src, dest, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git")
    )


# -- providers -------------------------------------------------------------


def resolve(release: Release, source: str) -> str:
    """`auto` becomes sdist when the lock lists one, else the official wheel."""
    if source == "auto":
        return "sdist" if "sdist" in release.artifacts else "wheel"
    return source


def materialize(
    release: Release,
    source: str,
    dest: Path,
    offline: bool = False,
    remote: str | None = None,
) -> str:
    """Write release's source tree into the empty folder dest; say what it came from."""
    kind = resolve(release, source)
    if kind == "sdist":
        path = download(release.artifact("sdist"), offline)
        extract_sdist(path, dest, f"vllm-{release.version}")
        return path.name
    if kind in ("wheel", "cpu-wheel"):
        art = release.artifact(kind)
        path = cached(art)
        if path is None and art.record_sha256 and not offline:
            extract_wheel_lazy(art, dest)
            return art.filename
        path = path or download(art, offline)
        extract_wheel(path, dest)
        return path.name
    if kind == "git":
        url = remote or VLLM_REMOTE
        if offline:
            raise NetworkError("--offline cannot be used with --source git")
        head = gitutil.clone_tag(url, release.tag, dest)
        want = release.commit.removeprefix("g")
        if not head.startswith(want):
            shutil.rmtree(dest / ".git", ignore_errors=True)
            raise IntegrityError(
                f"{url} tag {release.tag} is commit {head[:12]}, "
                f"but the lock pins {want}; check --remote"
            )
        return f"{url}@{release.tag}"
    path = Path(source).expanduser()
    if path.exists() or os.sep in source or source.startswith("."):
        copy_folder(path, dest)
        return str(path)
    raise ConfigError(f"unknown source {source!r}; use one of {', '.join(SOURCES)} or a folder")
