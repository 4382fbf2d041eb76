"""The fatbin reader on synthetic ELF files built here byte by byte (and, when
nvcc is on PATH, on real nvcc output)."""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest
from support import ELF, PTX, A, F, Z, container, cuda_so, entry, make_elf
from vpatch.errors import WheelError
from vpatch.wheel import fatbin
from vpatch.wheel.fatbin import Target


def scan_bytes(data: bytes, name: str = "x.so") -> fatbin.ExtensionReport:
    return fatbin.scan(io.BytesIO(data), name)


# -- architectures -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cc"),
    [
        ("sm_100", 100),
        ("sm_100a", 100),
        ("compute_90", 90),
        ("100", 100),
        ("10.0", 100),
        ("12.0f", 120),
        ("SM_89", 89),
        (103, 103),
    ],
)
def test_parse_arch(text, cc):
    assert fatbin.parse_arch(text) == cc


@pytest.mark.parametrize("text", ["", "sm_", "hopper", "sm_100x", "10.10"])
def test_parse_arch_rejects(text):
    with pytest.raises(ValueError, match="not a CUDA architecture"):
        fatbin.parse_arch(text)


@pytest.mark.parametrize(
    ("target", "cc", "runs"),
    [
        (Target(100, "", False), 100, True),
        (Target(100, "", False), 103, True),  # binary compatible within a major
        (Target(100, "", False), 120, False),
        (Target(90, "", False), 100, False),  # SASS never crosses a major
        (Target(80, "", False), 86, True),
        (Target(86, "", False), 80, False),
        (Target(100, "a", False), 100, True),
        (Target(100, "a", False), 103, False),  # arch-specific: exactly that GPU
        (Target(90, "a", False), 100, False),
        (Target(100, "f", False), 103, True),  # family: same major, >=
        (Target(100, "f", False), 120, False),
        (Target(80, "", True), 100, True),  # PTX JIT-compiles forward
        (Target(120, "", True), 100, False),
        (Target(100, "a", True), 100, True),
        (Target(90, "a", True), 100, False),
        (Target(100, "f", True), 103, True),
        (Target(100, "f", True), 120, False),
    ],
)
def test_target_runs_on(target, cc, runs):
    assert target.runs_on(cc) is runs


def test_labels():
    assert Target(100, "a", False).label == "sm_100a"
    assert Target(80, "", True).label == "compute_80"


# -- reading -------------------------------------------------------------------


def test_report_lists_sass_and_ptx():
    rep = scan_bytes(
        cuda_so(
            entry(ELF, 100),
            entry(ELF, 100, A, hsize=96),
            entry(ELF, 90, A),
            entry(ELF, 80),
            entry(PTX, 80, Z, hsize=80),
            entry(ELF, 80),
        )
    )
    assert rep.has_fatbin and [s.name for s in rep.sections] == [".nv_fatbin"]
    assert rep.sass == ["sm_80", "sm_90a", "sm_100", "sm_100a"]
    assert rep.ptx == ["compute_80"]
    assert rep.compressed_entries == 1
    assert rep.targets()[Target(80, "", False)] == 2
    ok, why = rep.supports("sm_100")
    assert ok and "sm_100 sm_100a" in why


def test_ptx_is_enough_when_it_jit_compiles():
    rep = scan_bytes(cuda_so(entry(ELF, 90, A), entry(PTX, 80)))
    ok, why = rep.supports("sm_100")
    assert ok and "PTX compute_80" in why
    ok, why = rep.supports("sm_75")
    assert not ok and "neither SASS for sm_75 nor PTX" in why


def test_hopper_only_extension_fails_sm_100():
    rep = scan_bytes(cuda_so(entry(ELF, 90, A), entry(ELF, 120)))
    ok, why = rep.supports("sm_100")
    assert not ok
    assert rep.supports("sm_90")[0] and rep.supports("sm_121")[0]


def test_family_and_arch_specific_flags():
    rep = scan_bytes(cuda_so(entry(ELF, 100, F), entry(PTX, 100, A)))
    assert rep.sass == ["sm_100f"] and rep.ptx == ["compute_100a"]


def test_several_containers_and_sections_with_padding():
    fb = container(entry(ELF, 80)) + b"\x00" * 4 + container(entry(ELF, 100), entry(PTX, 90))
    rel = container(entry(ELF, 120))
    data = make_elf([(".nv_fatbin", fb), ("__nv_relfatbin", rel), (".nvFatBinSegment", bytes(24))])
    rep = scan_bytes(data)
    assert [s.name for s in rep.sections] == [".nv_fatbin", "__nv_relfatbin"]
    assert rep.sass == ["sm_80", "sm_100", "sm_120"] and rep.ptx == ["compute_90"]
    assert sorted({e.container for e in rep.entries}) == [0, 1, 2]
    ok, why = rep.supports("sm_100")
    assert ok and "(1/3 fatbin containers)" in why


def test_unknown_kinds_are_listed_not_counted():
    rep = scan_bytes(cuda_so(entry(0x40, 100), entry(ELF, 100)))
    assert rep.other_kinds == [0x40] and rep.sass == ["sm_100"]


def test_no_fatbin_section():
    rep = scan_bytes(make_elf([(".text", b"\xc3" * 16)]))
    assert not rep.has_fatbin and rep.sass == rep.ptx == []
    assert rep.supports("sm_100") == (False, "no CUDA fatbin section")


def test_a_file_without_fatbin_has_an_empty_report():
    rep = scan_bytes(make_elf([(".text", b"\xc3")]), "_C.abi3.so")
    assert not rep.has_fatbin and rep.sass == [] and rep.ptx == []


def test_not_elf():
    with pytest.raises(WheelError, match="not an ELF file"):
        scan_bytes(b"MZ" + bytes(100))


def test_bad_fatbin_magic():
    data = make_elf([(".nv_fatbin", b"\x01\x02\x03\x04" + bytes(28))])
    with pytest.raises(WheelError, match="bad fatbin magic"):
        scan_bytes(data)


def test_container_overrunning_its_section():
    fb = bytearray(container(entry(ELF, 100)))
    struct.pack_into("<Q", fb, 8, 10_000)
    with pytest.raises(WheelError, match="overruns .nv_fatbin"):
        scan_bytes(make_elf([(".nv_fatbin", bytes(fb))]))


def test_entry_overrunning_its_container():
    e = bytearray(entry(ELF, 100))
    struct.pack_into("<Q", e, 8, 1 << 20)
    with pytest.raises(WheelError, match="corrupt fatbin entry"):
        scan_bytes(make_elf([(".nv_fatbin", container(bytes(e)))]))


def test_truncated_file():
    data = cuda_so(entry(ELF, 100))
    with pytest.raises(WheelError, match="outside the file|truncated"):
        scan_bytes(data[: len(data) - 40])


def test_payloads_are_skipped_not_read():
    """Only headers are read: a file with 8 MB of payload costs a few KB."""
    big = b"\xab" * (8 << 20)
    data = cuda_so(entry(ELF, 100, payload=big), entry(PTX, 90, Z, payload=big))

    class Counting(io.BytesIO):
        bytes_read = 0

        def read(self, n=-1):
            out = super().read(n)
            Counting.bytes_read += len(out)
            return out

    rep = fatbin.scan(Counting(data), "big.so")
    assert rep.sass == ["sm_100"] and rep.ptx == ["compute_90"]
    assert Counting.bytes_read < 64 << 10


def report(whl: Path) -> list[fatbin.ExtensionReport]:
    with zipfile.ZipFile(whl) as zf:
        return [fatbin.scan_member(zf, i) for i in zf.infolist() if fatbin.is_extension(i.filename)]


def test_members_of_a_wheel_and_format(tmp_path):
    whl = tmp_path / "w-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("w/_C.abi3.so", cuda_so(entry(ELF, 100), entry(PTX, 80)))
        zf.writestr("w/cpu_only.so", make_elf([(".text", b"\xc3")]))
        zf.writestr("w/__init__.py", "")
    reps = report(whl)
    assert [r.name for r in reps] == ["w/_C.abi3.so", "w/cpu_only.so"]
    assert reps[0].module == "_C"
    text = fatbin.format_report(reps)
    assert "w/_C.abi3.so" in text and "SASS: sm_100" in text and "PTX: compute_80" in text
    assert "w/cpu_only.so" in text and "no CUDA device code" in text


def test_format_on_a_cpu_wheel_says_so(tmp_path):
    whl = tmp_path / "w-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("w/_C.abi3.so", make_elf([(".text", b"\xc3")]))
    assert "carries no CUDA code" in fatbin.format_report(report(whl))


def test_a_member_that_cannot_be_read(tmp_path):
    whl = tmp_path / "w-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("w/_C.abi3.so", cuda_so(entry(ELF, 100)) * 4)
    data = bytearray(whl.read_bytes())
    data[60:80] = bytes(20)  # inside the deflated data
    whl.write_bytes(bytes(data))
    with zipfile.ZipFile(whl) as zf, pytest.raises(WheelError, match="cannot read"):
        fatbin.scan_member(zf, zf.infolist()[0])


# -- real nvcc output --------------------------------------------------------------


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_real_nvcc_object(tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    obj = tmp_path / "k.o"
    cmd = ["nvcc", "-c", str(cu), "-o", str(obj),
           "-gencode", "arch=compute_90a,code=sm_90a",
           "-gencode", "arch=compute_100,code=sm_100",
           "-gencode", "arch=compute_120f,code=sm_120f",
           "-gencode", "arch=compute_80,code=compute_80"]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"nvcc cannot compile here: {res.stderr.strip()[-200:]}")
    with open(obj, "rb") as f:
        rep = fatbin.scan(f, str(obj))
    assert rep.has_fatbin
    assert rep.sass == ["sm_90a", "sm_100", "sm_120f"]
    assert rep.ptx == ["compute_80"]
    assert rep.supports("sm_100")[0] and rep.supports("sm_121")[0]
