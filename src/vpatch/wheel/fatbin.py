"""CUDA device code inside extension modules: which SASS and PTX
architectures a wheel's `.so` files carry.

Pure Python, no CUDA tools. For each ELF extension module it reads the ELF
header, the section header table and the section-name table, then walks the
fatbin sections (`.nv_fatbin`, `__nv_relfatbin`) header by header, seeking
over every payload: a payload may be compressed, and only its header is
needed. Files on disk are read by seek; a member of a wheel (deflated, so
not seekable cheaply) is streamed once into a temporary file and read there,
so a 500 MB extension is never held in memory.

Fatbin layout (little-endian; confirmed on nvcc 13.0 output and on the
official vLLM 0.15.1 / 0.17.1 CUDA wheels):

    container: u32 magic 0xBA55ED50, u16 version (1), u16 header size (16),
               u64 size of the entries that follow; containers follow each
               other in the section, possibly padded with zeros to 8 bytes.
    entry:     u16 kind (1 = PTX, 2 = ELF/SASS), u16 version (0x0101),
               u32 header size (64, 80, 96 or 112), u64 payload size,
               ..., u32 arch at +28 (sm number: 90, 100, 120),
               u64 flags at +40; the payload follows the header.
    flags:     0x0001 64-bit, 0x0010 Linux host, 0x2000 / 0x8000 payload
               compressed (LZ4 / zstd), 0x100000 arch-specific (`sm_100a`),
               0x200000 family-specific (`sm_100f`).

Which code can run on a GPU of compute capability M.m (`sm_Mm`):
  * SASS `sm_Xx`  : same major, X.x <= M.m (binary compatibility in a major);
  * SASS `sm_Xxa` : only on exactly X.x;
  * SASS `sm_Xxf` : same major (the family), X.x <= M.m;
  * PTX `compute_Xx` : JIT-compiled on any X.x <= M.m;
  * PTX `compute_Xxa`: only on exactly X.x; `compute_Xxf`: same major, X.x <= M.m.
"""

from __future__ import annotations

import re
import struct
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import BinaryIO

from ..errors import WheelError

FATBIN_MAGIC = 0xBA55ED50
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
# The extensions whose device code vLLM cannot run without.
CORE_EXTENSIONS = ("_C", "_moe_C")
DEFAULT_ARCH = "sm_100"

KIND_PTX = 1
KIND_ELF = 2
FLAG_COMPRESSED = 0x2000 | 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000

_ELF_MAGIC = b"\x7fELF"
_SHT_NOBITS = 8
_SHN_XINDEX = 0xFFFF
_ENTRY_MIN = 64
_MAX_SECTIONS = 1 << 16
_SUFFIX_ORDER = {"": 0, "f": 1, "a": 2}


# --------------------------------------------------------------------------
# architectures


def parse_arch(arch: str | int) -> int:
    """`sm_100`, `sm_100a`, `compute_90`, `100`, `10.0` -> 100 (the compute
    capability as major*10 + minor). The suffix names code, not a GPU, and
    is dropped. Raises ValueError on anything else."""
    if isinstance(arch, int):
        return arch
    s = arch.strip().lower()
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)[af]?", s)
    if m:
        return int(m.group(1))
    m = re.fullmatch(r"(\d+)\.(\d)[af]?", s)
    if m:
        return int(m.group(1)) * 10 + int(m.group(2))
    raise ValueError(f"not a CUDA architecture: {arch!r} (expected e.g. sm_100)")


@dataclass(frozen=True, order=True)
class Target:
    """One kind of device code: SASS for `sm_<arch><suffix>` or PTX for
    `compute_<arch><suffix>` (suffix "", "a" or "f")."""

    arch: int
    suffix: str
    ptx: bool

    @property
    def label(self) -> str:
        return f"{'compute' if self.ptx else 'sm'}_{self.arch}{self.suffix}"

    def runs_on(self, cc: int) -> bool:
        """Whether this code runs on (SASS) or JIT-compiles for (PTX) a GPU
        of compute capability `cc` (e.g. 100 for sm_100)."""
        if self.suffix == "a":
            return cc == self.arch
        same_major = cc // 10 == self.arch // 10
        if self.suffix == "f" or not self.ptx:
            return same_major and self.arch <= cc
        return self.arch <= cc

    def sort_key(self) -> tuple[int, int, int]:
        return (int(self.ptx), self.arch, _SUFFIX_ORDER.get(self.suffix, 3))


# --------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class FatbinEntry:
    """The header of one fatbin entry; `offset` is the entry header's offset
    in the file."""

    offset: int
    container: int  # index of the fatbin container (one per linked object)
    kind: int
    arch: int
    flags: int
    header_size: int
    payload_size: int

    @property
    def compressed(self) -> bool:
        return bool(self.flags & FLAG_COMPRESSED)

    @property
    def suffix(self) -> str:
        if self.flags & FLAG_ARCH_SPECIFIC:
            return "a"
        if self.flags & FLAG_FAMILY:
            return "f"
        return ""

    @property
    def target(self) -> Target | None:
        """None for entry kinds other than PTX and ELF."""
        if self.kind not in (KIND_PTX, KIND_ELF):
            return None
        return Target(self.arch, self.suffix, self.kind == KIND_PTX)


@dataclass(frozen=True)
class Section:
    name: str
    offset: int
    size: int


@dataclass
class ExtensionReport:
    """The device code of one extension module. `name` is the member path
    in the wheel (or the file path)."""

    name: str
    size: int
    sections: list[Section] = field(default_factory=list)
    entries: list[FatbinEntry] = field(default_factory=list)

    @property
    def module(self) -> str:
        """`vllm/_moe_C.abi3.so` -> `_moe_C`."""
        return PurePosixPath(self.name).name.split(".", 1)[0]

    @property
    def has_fatbin(self) -> bool:
        return bool(self.sections)

    def targets(self) -> Counter[Target]:
        return Counter(t for e in self.entries if (t := e.target) is not None)

    @property
    def sass(self) -> list[str]:
        return [t.label for t in sorted(self.targets(), key=Target.sort_key) if not t.ptx]

    @property
    def ptx(self) -> list[str]:
        return [t.label for t in sorted(self.targets(), key=Target.sort_key) if t.ptx]

    @property
    def other_kinds(self) -> list[int]:
        return sorted({e.kind for e in self.entries if e.target is None})

    @property
    def compressed_entries(self) -> int:
        return sum(e.compressed for e in self.entries)

    def supports(self, arch: str | int) -> tuple[bool, str]:
        """(ok, why): whether a GPU `arch` can run this module's device code,
        from SASS built for it or PTX that JIT-compiles for it."""
        cc = parse_arch(arch)
        label = f"sm_{cc}"
        targets = self.targets()
        if not self.sections:
            return False, "no CUDA fatbin section"
        containers = {e.container for e in self.entries}
        covered = {e.container for e in self.entries if e.target and e.target.runs_on(cc)}
        cover = f" ({len(covered)}/{len(containers)} fatbin containers)"
        sass = sorted((t for t in targets if not t.ptx and t.runs_on(cc)), key=Target.sort_key)
        if sass:
            return True, f"SASS {' '.join(t.label for t in sass)} runs on {label}{cover}"
        ptx = sorted((t for t in targets if t.ptx and t.runs_on(cc)), key=Target.sort_key)
        if ptx:
            return True, f"no SASS for {label}; PTX {ptx[-1].label} JIT-compiles for it{cover}"
        return False, f"neither SASS for {label} nor PTX that JIT-compiles for it"


# --------------------------------------------------------------------------
# reading


class _Reader:
    """Bounds-checked reads at offsets of a seekable binary file."""

    def __init__(self, f: BinaryIO, size: int, name: str):
        self.f, self.size, self.name = f, size, name

    def read(self, off: int, n: int, what: str) -> bytes:
        if off < 0 or n < 0 or off + n > self.size:
            raise WheelError(
                f"{self.name}: {what} at offset {off}+{n} lies outside the file "
                f"({self.size} bytes): truncated or corrupt"
            )
        self.f.seek(off)
        data = self.f.read(n)
        if len(data) != n:
            raise WheelError(f"{self.name}: short read of {what} at offset {off}")
        return data


def _elf_sections(r: _Reader) -> list[Section]:
    ident = r.read(0, 16, "ELF header")
    if ident[:4] != _ELF_MAGIC:
        raise WheelError(f"{r.name}: not an ELF file")
    cls, data = ident[4], ident[5]
    if cls not in (1, 2) or data not in (1, 2):
        raise WheelError(f"{r.name}: unsupported ELF class/encoding {cls}/{data}")
    e = "<" if data == 1 else ">"
    is64 = cls == 2
    if is64:
        hdr = r.read(0, 64, "ELF header")
        shoff = struct.unpack_from(e + "Q", hdr, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", hdr, 0x3A)
        sh_fmt, need = e + "IIQQQQIIQQ", 64
    else:
        hdr = r.read(0, 52, "ELF header")
        shoff = struct.unpack_from(e + "I", hdr, 0x20)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", hdr, 0x2E)
        sh_fmt, need = e + "IIIIIIIIII", 40
    if shoff == 0:
        return []  # no section header table (a stripped-of-sections file)
    if shentsize < need:
        raise WheelError(f"{r.name}: ELF section header size {shentsize} < {need}")

    def sh(raw: bytes, i: int) -> tuple[int, int, int, int, int]:
        f = struct.unpack_from(sh_fmt, raw, i * shentsize)
        return f[0], f[1], f[4], f[5], f[6]  # name, type, offset, size, link

    first = sh(r.read(shoff, need, "ELF section header"), 0)
    if shnum == 0:  # extended numbering: the count is in section 0's size
        shnum = first[3]
    if shstrndx == _SHN_XINDEX:
        shstrndx = first[4]
    if not 0 < shnum <= _MAX_SECTIONS or shstrndx >= shnum:
        raise WheelError(f"{r.name}: corrupt ELF section table ({shnum} sections)")
    table = r.read(shoff, shnum * shentsize, "ELF section header table")
    headers = [sh(table, i) for i in range(shnum)]
    _, _, str_off, str_size, _ = headers[shstrndx]
    names = r.read(str_off, str_size, "section name table")
    out = []
    for name_off, typ, off, size, _ in headers:
        end = names.find(b"\0", name_off)
        name = names[name_off : end if end >= 0 else None].decode("latin-1")
        if name in FATBIN_SECTIONS and typ != _SHT_NOBITS and size:
            out.append(Section(name, off, size))
    return sorted(out, key=lambda s: s.offset)


def _walk_fatbin(r: _Reader, sec: Section, first_container: int = 0) -> list[FatbinEntry]:
    entries = []
    container = first_container
    pos, end = sec.offset, sec.offset + sec.size
    where = f"{sec.name} section"
    while pos + 16 <= end:
        magic, _version, hsize, fsize = struct.unpack("<IHHQ", r.read(pos, 16, where))
        if magic != FATBIN_MAGIC:
            if magic == 0:  # zero padding between containers
                pos += 4
                continue
            raise WheelError(
                f"{r.name}: bad fatbin magic {magic:#010x} at offset {pos} in {sec.name}"
            )
        if hsize < 16:
            raise WheelError(f"{r.name}: bad fatbin header size {hsize} at offset {pos}")
        e, cend = pos + hsize, pos + hsize + fsize
        if cend > end:
            raise WheelError(
                f"{r.name}: fatbin container at offset {pos} overruns {sec.name} "
                f"({cend} > {end}): truncated or corrupt"
            )
        while e + _ENTRY_MIN <= cend:
            h = r.read(e, _ENTRY_MIN, "fatbin entry header")
            kind, _ev, ehsize, esize = struct.unpack_from("<HHIQ", h, 0)
            if ehsize == 0:
                break
            if ehsize < _ENTRY_MIN or e + ehsize + esize > cend:
                raise WheelError(
                    f"{r.name}: corrupt fatbin entry at offset {e} "
                    f"(header {ehsize} bytes, payload {esize} bytes)"
                )
            arch = struct.unpack_from("<I", h, 28)[0]
            flags = struct.unpack_from("<Q", h, 40)[0]
            entries.append(FatbinEntry(e, container, kind, arch, flags, ehsize, esize))
            e += ehsize + esize
        pos = cend
        container += 1
    return entries


def scan(f: BinaryIO, name: str, size: int | None = None) -> ExtensionReport:
    """Report on one ELF file opened for binary reading (seekable).
    Raises WheelError for a file that is not ELF or whose fatbin is corrupt;
    a file without fatbin sections gets a report with no sections."""
    if size is None:
        f.seek(0, 2)
        size = f.tell()
    r = _Reader(f, size, name)
    sections = _elf_sections(r)
    entries: list[FatbinEntry] = []
    for sec in sections:
        first = entries[-1].container + 1 if entries else 0
        entries += _walk_fatbin(r, sec, first)
    return ExtensionReport(name, size, sections, entries)


def is_extension(name: str) -> bool:
    base = PurePosixPath(name).name
    return base.endswith(".so") or ".so." in base


def scan_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, tap: Callable[[bytes], object] | None = None
) -> ExtensionReport:
    """Report on one wheel member: streamed once into a temporary file
    (constant memory), then read by seek like a file on disk. `tap`, if
    given, sees every chunk of the member (to hash it in the same pass)."""
    try:
        with zf.open(info) as src, tempfile.TemporaryFile(prefix="vpatch-so-") as tmp:
            while chunk := src.read(1 << 20):
                if tap is not None:
                    tap(chunk)
                tmp.write(chunk)
            return scan(tmp, info.filename, info.file_size)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise WheelError(f"cannot read {info.filename} from the wheel: {e}") from None


def format_report(reports: list[ExtensionReport]) -> str:
    """Text for verify-wheel: per extension, the SASS and PTX architectures
    present (with entry counts when an arch has more than one)."""
    if not reports:
        return "no extension modules in the wheel"
    lines = []
    width = max(len(r.name) for r in reports)
    for r in reports:
        if not r.has_fatbin:
            lines.append(f"{r.name:<{width}}  no CUDA device code")
            continue
        counts = r.targets()

        def fmt(labels: list[str], counts: Counter[Target] = counts) -> str:
            by = {t.label: n for t, n in counts.items()}
            return " ".join(f"{lb}(x{by[lb]})" if by[lb] > 1 else lb for lb in labels) or "-"

        line = f"{r.name:<{width}}  SASS: {fmt(r.sass)}  PTX: {fmt(r.ptx)}"
        if r.other_kinds:
            line += f"  other kinds: {', '.join(str(k) for k in r.other_kinds)}"
        lines.append(line)
    if not any(r.has_fatbin for r in reports):
        lines.append("no fatbin in any extension: this wheel carries no CUDA code (a CPU wheel)")
    return "\n".join(lines)
