"""zipcopy.py, the zip writer that copies members' compressed bytes as they
are: zip64 fields, page-aligned runs and kernel-copy fallbacks through the
overlay, then its own plan (`layout`) and copy (`run`) on plain zips."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from support import BASE, BLOB, check_record, data_offset, make_wheel, raw_member
from vpatch.errors import WheelError
from vpatch.wheel import overlay, zipcopy

MODEL = BASE["vllm/model.py"]


def test_zip64_fields_when_needed(whl, wheel_series, tmp_path, monkeypatch):
    monkeypatch.setattr(zipcopy, "_ZIP64_AT", 1000)  # every size/offset past 1000 goes zip64
    monkeypatch.setattr(zipcopy, "_ZIP64_COUNT", 3)
    res = overlay.overlay(whl, wheel_series, tmp_path / "out")
    with open(res.path, "rb") as f:
        assert b"PK\x06\x06" in f.read()  # zip64 end of central directory
    check_record(res.path)


def test_large_runs_are_page_aligned(tmp_path, wheel_series, monkeypatch):
    monkeypatch.setattr(zipcopy, "_ALIGN_RUN", 1)
    (tmp_path / "in").mkdir()
    files = {"vllm/config.py": BASE["vllm/config.py"].encode(), "vllm/z.bin": BLOB,
             "vllm/model.py": MODEL.encode(), "vllm/zz.bin": BLOB[::-1]}  # fmt: skip
    src = make_wheel(tmp_path / "in", files=files)
    res = overlay.overlay(src, wheel_series, tmp_path / "out")
    with zipfile.ZipFile(res.path) as out, zipfile.ZipFile(src) as inp:
        for n in ("vllm/z.bin", "vllm/zz.bin"):
            new, old = out.getinfo(n), inp.getinfo(n)
            assert raw_member(res.path, new) == raw_member(src, old)
            assert (data_offset(res.path, new) - data_offset(src, old)) % 4096 == 0
    check_record(res.path)
    if shutil.which("unzip"):
        out = subprocess.run(["unzip", "-tq", str(res.path)], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr


def test_copy_falls_back_when_the_kernel_cannot(whl, wheel_series, tmp_path, monkeypatch):
    monkeypatch.setattr(zipcopy, "_ALIGN_RUN", 1)  # the page-aligned path too
    ref = overlay.overlay(whl, wheel_series, tmp_path / "a").path.read_bytes()

    def refuse(*args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    assert overlay.overlay(whl, wheel_series, tmp_path / "b").path.read_bytes() == ref
    monkeypatch.setattr(os, "sendfile", refuse)
    assert overlay.overlay(whl, wheel_series, tmp_path / "c").path.read_bytes() == ref


# -- layout and run on plain zips ---------------------------------------------------


def plain_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 2, 3, 4, 6))
            info.compress_type = (
                zipfile.ZIP_STORED if name.endswith(".bin") else zipfile.ZIP_DEFLATED
            )
            info.external_attr = 0o100644 << 16
            zf.writestr(info, data)
    return path


def rewrite(src: Path, dst: Path, plan) -> None:
    """plan(zip, fd) -> members; laid out after no verbatim prefix and run."""
    with zipfile.ZipFile(src) as zf, open(src, "rb") as f:
        members = plan(zf, f.fileno())
        steps = zipcopy.layout(members, 0, 0, zf.comment, f.fileno())
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            zipcopy.run(f.fileno(), out, steps)
        finally:
            os.close(out)


def kept(zf: zipfile.ZipFile, fd: int, src: Path, info: zipfile.ZipInfo, name: str | None = None):
    """A member copied as its raw bytes: verbatim, or under a new name."""
    start, end, _ = zipcopy.local_span(fd, info, src)
    m = zipcopy.Member(
        name or info.filename, info, info.compress_type, info.CRC, info.compress_size,
        info.file_size,
    )  # fmt: skip
    if name is None:
        m.verbatim = (info.header_offset, end)
    else:
        m.raw_at = start
    return m


MEMBERS = {"a.py": b"a = 1\n" * 500, "data.bin": BLOB[:5000], "zzz/é.txt": "é\n".encode()}


def test_members_are_copied_renamed_replaced_and_added(tmp_path):
    src = plain_zip(tmp_path / "in.zip", MEMBERS)
    dst = tmp_path / "out.zip"

    def plan(zf, fd):
        a, data, e = zf.infolist()
        return [
            kept(zf, fd, src, a),
            kept(zf, fd, src, data, name="moved/data.bin"),
            zipcopy.new_member("zzz/é.txt", "è\n".encode(), template=e),
            zipcopy.new_member("new.txt", b"new\n" * 100, template=None),
        ]

    rewrite(src, dst, plan)
    with zipfile.ZipFile(dst) as out, zipfile.ZipFile(src) as inp:
        assert out.testzip() is None
        assert out.namelist() == ["a.py", "moved/data.bin", "zzz/é.txt", "new.txt"]
        assert out.read("moved/data.bin") == MEMBERS["data.bin"]
        assert out.read("zzz/é.txt") == "è\n".encode() and out.read("new.txt") == b"new\n" * 100
        assert raw_member(dst, out.getinfo("a.py")) == raw_member(src, inp.getinfo("a.py"))
        assert out.getinfo("moved/data.bin").compress_type == zipfile.ZIP_STORED
        assert out.getinfo("new.txt").compress_type == zipfile.ZIP_DEFLATED
        assert out.getinfo("zzz/é.txt").flag_bits & 0x800  # a UTF-8 name says so
        assert out.getinfo("a.py").date_time == (2026, 1, 2, 3, 4, 6)
    if shutil.which("unzip"):
        res = subprocess.run(["unzip", "-tq", str(dst)], capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr


def test_consecutive_verbatim_members_are_one_copy(tmp_path):
    src = plain_zip(tmp_path / "in.zip", MEMBERS)
    with zipfile.ZipFile(src) as zf, open(src, "rb") as f:
        members = [kept(zf, f.fileno(), src, i) for i in zf.infolist()]
        steps = zipcopy.layout(members, 0, 0, b"", f.fileno())
    assert [s[0] for s in steps] == ["copy", "write"]  # the members, then the directory
    assert steps[0][1:] == (0, members[-1].verbatim[1], 0)


def test_a_stored_new_member_stays_stored():
    template = zipfile.ZipInfo("x.bin")
    template.compress_type, template.file_size = zipfile.ZIP_STORED, 10
    m = zipcopy.new_member("x.bin", b"0123456789", template)
    assert (m.compress_type, m.data, m.compress_size) == (zipfile.ZIP_STORED, b"0123456789", 10)
    assert zipcopy.new_member("y", b"y" * 1000, None).compress_size < 1000


def test_a_local_header_that_disagrees_with_the_directory(tmp_path):
    src = plain_zip(tmp_path / "in.zip", {"a.py": b"a\n", "b.py": b"b\n"})
    data = bytearray(src.read_bytes())
    at = data.index(b"b.py")  # the local header's name of the second member
    data[at : at + 4] = b"c.py"
    src.write_bytes(bytes(data))
    with zipfile.ZipFile(src) as zf, open(src, "rb") as f:
        info = zf.getinfo("b.py")
        with pytest.raises(WheelError, match="does not match the central directory"):
            zipcopy.local_span(f.fileno(), info, src)
        info.header_offset = src.stat().st_size - 10
        with pytest.raises(WheelError, match="truncated zip"):
            zipcopy.local_span(f.fileno(), info, src)


def test_a_copy_past_the_end_of_the_input_says_truncated(tmp_path, monkeypatch):
    src = tmp_path / "in"
    src.write_bytes(b"x" * 100)
    dst = tmp_path / "out"
    with open(src, "rb") as f, open(dst, "wb") as g:
        with pytest.raises(WheelError, match="ended early: truncated"):
            zipcopy.run(f.fileno(), g.fileno(), [("copy", 50, 100, 0)])
        monkeypatch.delattr(os, "copy_file_range")
        with pytest.raises(WheelError, match="ended early: truncated"):
            zipcopy.run(f.fileno(), g.fileno(), [("copy", 50, 100, 0)])


def test_member_ends_and_central_entries(tmp_path):
    """Each member's bytes run to the next member's local header (the last
    to the central directory); the raw central entries are the input's own."""
    src = plain_zip(tmp_path / "in.zip", MEMBERS)
    with zipfile.ZipFile(src) as zf, open(src, "rb") as f:
        ends = zipcopy.member_ends(zf)
        infos = zf.infolist()
        assert [ends[i.filename] for i in infos[:-1]] == [i.header_offset for i in infos[1:]]
        assert ends[infos[-1].filename] == zf.start_dir
        entries = zipcopy.central_entries(f.fileno(), zf, src)
    data = src.read_bytes()
    assert b"".join(entries) == data[zf.start_dir : zf.start_dir + len(b"".join(entries))]
    assert [e[46 : 46 + len(i.filename.encode())] for e, i in zip(entries, infos, strict=True)] == [
        i.filename.encode() for i in infos
    ]


def test_a_verbatim_member_keeps_its_central_entry_with_a_new_offset(tmp_path):
    src = plain_zip(tmp_path / "in.zip", MEMBERS)
    with zipfile.ZipFile(src) as zf, open(src, "rb") as f:
        members = [kept(zf, f.fileno(), src, i) for i in zf.infolist()]
        entries = zipcopy.central_entries(f.fileno(), zf, src)
        for m, e in zip(members, entries, strict=True):
            m.central = e
        lead = zipcopy.new_member("lead.txt", b"first\n", None)
        steps = zipcopy.layout([lead, *members], 0, 0, b"", f.fileno())
        dst = tmp_path / "out.zip"
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            zipcopy.run(f.fileno(), out, steps)
        finally:
            os.close(out)
    with zipfile.ZipFile(dst) as z:
        assert z.testzip() is None
        assert [i.filename for i in z.infolist()] == ["lead.txt", *MEMBERS]
        for name, data in MEMBERS.items():
            assert z.read(name) == data
    moved = members[0]
    assert moved.offset > 0 and zipcopy._central_header(moved)[46:] == entries[0][46:]
