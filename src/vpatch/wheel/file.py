"""One type owns the wheel format (after pypa/wheel's WheelFile): `WheelFile`
opens a wheel and checks it (a readable zip, member paths inside the tree,
one .dist-info with METADATA, WHEEL and RECORD, a RECORD that lists exactly
the members with their sizes), reads members against their RECORD hashes,
and knows the wheel's names and versions.

Nothing here writes; the overlay (overlay.py) writes a new wheel from one.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .. import record
from ..errors import RecordMismatch, WheelError, disk_error
from ..paths import safe_relpath

LOCAL_TAG = "eagle3"
SIGNATURES = ("RECORD.jws", "RECORD.p7s")
# what reading a damaged zip member raises
READ_ERRORS = (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError)


def local_version(version: str, series_hash: str) -> str:
    """`X.Y.Z` + series hash -> `X.Y.Z+eagle3.1a2b3c4d` (PEP 440
    normalized, so what pip reports; an all-digit hash chunk loses leading
    zeros in normalization). A version that already has a local part keeps
    it: `X.Y.Z+cu129` -> `X.Y.Z+cu129.eagle3.1a2b3c4d`."""
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


def open_zip(path: Path) -> zipfile.ZipFile:
    """The wheel's zip, or WheelError (a wheel given by the user that is no zip)."""
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise WheelError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise WheelError(f"{path}: is a folder, not a wheel") from None
    except (zipfile.BadZipFile, EOFError, ValueError) as e:
        raise WheelError(f"{path.name}: not a readable wheel (bad zip: {e})") from None
    except OSError as e:
        raise disk_error(e, "cannot read the wheel") from None


@dataclass
class WheelFile:
    """An opened wheel: its central directory, dist-info and RECORD. Use
    `WheelFile.open(path)` (checks everything listed in the module docstring)
    as a context manager."""

    path: Path
    zf: zipfile.ZipFile
    infos: list[zipfile.ZipInfo]
    dist_info: str  # "vllm-X.Y.Z.dist-info"
    data_dir: str | None  # "vllm-X.Y.Z.data" when present
    metadata: bytes
    version: str  # METADATA Version:
    project: str  # METADATA Name:
    record_name: str
    rows: list[record.Row]
    _rmap: dict[str, record.Row] | None = field(default=None, repr=False)

    @classmethod
    def open(cls, path: Path, zf: zipfile.ZipFile | None = None) -> WheelFile:
        """Open and check a wheel (WheelError; RecordMismatch when only RECORD
        disagrees with the members; UnsafePathError for a member path
        outside the tree). `zf`: an already opened zip of it."""
        path = Path(path)
        own = zf is None
        zf = zf or open_zip(path)
        try:
            return _check(path, zf)
        except BaseException:
            if own:
                zf.close()
            raise

    def __enter__(self) -> WheelFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.zf.close()

    def packages(self) -> set[str]:
        """Top-level folders that install into site-packages (`vllm`)."""
        tops = set()
        for i in self.infos:
            parts = i.filename.split("/")
            if len(parts) > 1 and not parts[0].endswith((".dist-info", ".data")):
                tops.add(parts[0])
        return tops

    def has(self, name: str) -> bool:
        return name in self.zf.NameToInfo

    def read(self, name: str) -> bytes:
        """A member's bytes, unchecked."""
        return _read_member(self.zf, self.zf.getinfo(name), self.path)

    def read_checked(self, name: str) -> bytes:
        """A member's bytes, checked against its RECORD hash."""
        data = self.read(name)
        row = self.record_map().get(name)
        if row is not None and row.hash:
            _check_hash(name, data, row.hash, self.path)
        return data

    def record_map(self) -> dict[str, record.Row]:
        if self._rmap is None:
            self._rmap = {r.path: r for r in self.rows}
        return self._rmap


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: Path) -> bytes:
    try:
        return zf.read(info)
    except READ_ERRORS as e:
        raise WheelError(f"{where.name}: cannot read member {info.filename}: {e}") from None


def _check_hash(name: str, data: bytes, spec: str, where: Path) -> None:
    try:
        ok = record.check(data, spec)
    except record.RecordError as e:
        raise RecordMismatch(f"{where.name}: RECORD mismatch: {e} for {name}") from None
    if not ok:
        raise RecordMismatch(
            f"{where.name}: RECORD mismatch: {name} does not have the hash RECORD lists"
        )


def _check(path: Path, zf: zipfile.ZipFile) -> WheelFile:
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
    meta = _headers(metadata)
    if "Version" not in meta or "Name" not in meta:
        raise WheelError(f"{path.name}: METADATA lacks Name: or Version:")
    fn_project = path.name.removesuffix(".whl").split("-")[0]
    if canonicalize_name(fn_project) != canonicalize_name(meta["Name"]):
        raise WheelError(
            f"{path.name}: file name project {fn_project!r} is not METADATA's {meta['Name']!r}"
        )
    try:
        rows = record.parse(_read_member(zf, zf.getinfo(record_name), path))
    except record.RecordError as e:
        raise WheelError(f"{path.name}: {e}") from None  # not even CSV: no wheel to report on
    w = WheelFile(
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
    _check_listing(w)
    _check_hash(
        f"{dist_info}/METADATA", metadata, w.record_map()[f"{dist_info}/METADATA"].hash, path
    )
    return w


def _check_name(name: str, what: str) -> None:
    """safe_relpath, with a fast path for the plain names of a wheel."""
    if name.startswith("/") or "\\" in name or ".." in name or ":" in name.split("/", 1)[0]:
        safe_relpath(name, what)


def _headers(metadata: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in metadata.decode("utf-8", "replace").splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and not line[0].isspace():
            out.setdefault(key.strip(), value.strip())
    return out


def _check_listing(w: WheelFile) -> None:
    """RECORD must list every member (but itself and signatures: with empty
    hash) exactly once, with its size; and nothing else."""
    seen: dict[str, record.Row] = {}
    for r in w.rows:
        if r.path in seen:
            raise RecordMismatch(f"{w.path.name}: RECORD mismatch: {r.path} is listed twice")
        seen[r.path] = r
    sigs = {f"{w.dist_info}/{s}" for s in SIGNATURES}
    for i in w.infos:
        if i.is_dir() or i.filename in sigs:
            continue
        if i.filename not in seen:
            raise RecordMismatch(
                f"{w.path.name}: RECORD mismatch: member {i.filename} is not listed"
            )
        r = seen.pop(i.filename)
        if i.filename == w.record_name:
            continue
        if not r.hash or "=" not in r.hash:
            raise RecordMismatch(f"{w.path.name}: RECORD mismatch: {i.filename} has no hash")
        if r.size != str(i.file_size):
            raise RecordMismatch(
                f"{w.path.name}: RECORD mismatch: {i.filename} is {i.file_size} bytes, "
                f"RECORD says {r.size or 'nothing'}"
            )
    if seen:
        extra = sorted(seen)
        raise RecordMismatch(
            f"{w.path.name}: RECORD mismatch: lists {extra[0]}, which is not in the wheel"
            + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "")
        )


def set_version(metadata: bytes, new: str, where: Path) -> bytes:
    """METADATA with its Version: header replaced."""
    lines = metadata.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if not line.strip():
            break
        if line.startswith(b"Version:"):
            eol = line[len(line.rstrip(b"\r\n")) :]
            lines[i] = b"Version: " + new.encode() + eol
            return b"".join(lines)
    raise WheelError(f"{where.name}: METADATA has no Version: header")
