"""A small zip writer that copies members' compressed bytes as they are.

For rewriting a large zip (a wheel) where almost every member is unchanged:
the output is planned as `Member`s, each taking its bytes from a verbatim
(local header + data) range of the input, from the input's raw compressed
data under a rewritten local header, or from new bytes; `layout` turns them
into write and copy steps (consecutive verbatim members are one copy; large
runs get a page-alignment extra field, as zipalign does) and `run` carries
them out, copying in the kernel with copy_file_range/sendfile where it can.
Nothing is ever recompressed. Handles zip64 sizes, offsets and counts, and
input members with data descriptors (their headers are rewritten).
Knows nothing about what the zip holds.
"""

from __future__ import annotations

import os
import struct
import threading
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import WheelError

_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_EOCD = struct.Struct("<IHHHHIIH")
_EOCD64 = struct.Struct("<IQHHIIQQQQ")
_LOC64 = struct.Struct("<IIQI")
_ZIP64_AT = 0xFFFFFFFF  # sizes/offsets from here on need zip64 fields
_ZIP64_COUNT = 0xFFFF
_PAGE = 4096
_ALIGN_RUN = 1 << 20  # runs at least this long get page-aligned
_CHUNK = 1 << 20


@dataclass
class Member:
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
    # a verbatim member's own central directory entry, reused with its offset
    # field patched instead of rebuilding the entry field by field
    central: bytes | None = None

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


def _dos(dt: tuple[int, int, int, int, int, int]) -> tuple[int, int]:
    y, mo, d, h, mi, s = dt
    y = min(max(y, 1980), 2107)
    return (h << 11) | (mi << 5) | (s // 2), ((y - 1980) << 9) | (mo << 5) | d


def _local_header(m: Member, align_to: tuple[int, int] | None = None) -> bytes:
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


def _central_header(m: Member) -> bytes:
    if m.central is not None and m.verbatim is not None:
        (old,) = struct.unpack_from("<I", m.central, 42)
        if old != 0xFFFFFFFF and m.offset < _ZIP64_AT:  # no zip64 offset either side
            if old == m.offset:
                return m.central
            return m.central[:42] + struct.pack("<I", m.offset) + m.central[46:]
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


class Output:
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


def local_span(src: int, info: zipfile.ZipInfo, where: Path) -> tuple[int, int, bool]:
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


def _data_start(src: int, m: Member) -> int:
    """Where a verbatim member's data starts: after its local header."""
    assert m.verbatim is not None
    head = os.pread(src, 30, m.verbatim[0])
    nlen, elen = struct.unpack_from("<HH", head, 26)
    return int(m.verbatim[0] + 30 + nlen + elen)


def central_entries(src: int, zf: zipfile.ZipFile, where: Path) -> list[bytes]:
    """The raw central directory entries of zf (opened on descriptor src), in
    zf.infolist() order."""
    start = zf.start_dir  # where ZipFile found the central directory
    raw = os.pread(src, os.fstat(src).st_size - start, start)  # + the end records: small
    out, pos = [], 0
    for info in zf.infolist():
        if len(raw) < pos + 46 or raw[pos : pos + 4] != b"PK\x01\x02":
            raise WheelError(f"{where.name}: the central directory is corrupt")
        nlen, elen, clen = struct.unpack_from("<HHH", raw, pos + 28)
        size = 46 + nlen + elen + clen
        (offset,) = struct.unpack_from("<I", raw, pos + 42)
        if offset != min(info.header_offset, 0xFFFFFFFF):
            raise WheelError(f"{where.name}: the central directory is corrupt")
        out.append(raw[pos : pos + size])
        pos += size
    return out


def member_ends(zf: zipfile.ZipFile) -> dict[str, int]:
    """Where each member's bytes (local header, data, data descriptor) end:
    the next member's local header, or the central directory."""
    infos = sorted(zf.infolist(), key=lambda i: i.header_offset)
    stops = [i.header_offset for i in infos[1:]] + [zf.start_dir]
    return {i.filename: stop for i, stop in zip(infos, stops, strict=True)}


def new_member(name: str, data: bytes, template: zipfile.ZipInfo | None) -> Member:
    if template is None:
        template = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        template.external_attr = 0o100644 << 16
        template.create_system = 3
        template.create_version = 20
        template.extract_version = 20
    stored = template.compress_type == zipfile.ZIP_STORED and template.file_size > 0
    body = data if stored else _deflate(data)
    ctype = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    return Member(name, template, ctype, zlib.crc32(data), len(body), len(data), data=body)


Write = tuple[Literal["write"], int, bytes]  # (kind, output offset, bytes)
Copy = tuple[Literal["copy"], int, int, int]  # (kind, input offset, count, output offset)
Step = Write | Copy


def layout(members: list[Member], start: int, pos: int, comment: bytes, src: int) -> list[Step]:
    """Where every byte of the output comes from: a list of ("write", offset,
    bytes) and ("copy", input offset, count, offset) steps for members[start:]
    (members[:start] are already placed, at their input offsets), then the
    central directory. Runs of consecutive verbatim members are one copy;
    before a large run that would land at another offset modulo the page
    size, its first member's header is rewritten with an alignment extra
    field (as zipalign does) so the kernel copies whole pages."""
    for m in members[:start]:
        m.offset = m.info.header_offset
    steps: list[Step] = []
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
                assert m.raw_at is not None
                steps.append(("copy", m.raw_at, m.compress_size, pos))
            pos += m.compress_size
            k += 1
            continue
        a, b = m.verbatim
        j = k + 1
        while j < len(members) and (run := members[j].verbatim) is not None and run[0] == b:
            b = run[1]
            j += 1
        copy_from = a
        if b - a >= _ALIGN_RUN and (pos - a) % _PAGE:
            data_at = _data_start(src, m)
            head = _local_header(m, align_to=(data_at, pos))
            steps.append(("write", pos, head))
            pos += len(head)
            copy_from = data_at
        for n in members[k + 1 : j]:
            assert n.verbatim is not None
            n.offset = pos + (n.verbatim[0] - copy_from)
        steps.append(("copy", copy_from, b - copy_from, pos))
        pos += b - copy_from
        k = j
    cd = b"".join(_central_header(m) for m in members)
    steps.append(("write", pos, cd + _end_records(len(members), pos, len(cd), comment)))
    return steps


def run(src: int, dst: int, steps: list[Step]) -> None:
    """Carry out `layout`'s steps from the input descriptor to the output's."""
    for step in steps:
        if step[0] == "write":
            _pwrite_all(dst, step[2], step[1])
        else:
            _copy_range(src, dst, step[1], step[2], step[3])
