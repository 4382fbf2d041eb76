"""patch.py: a series applied to the files a wheel ships (by `git apply` on
copies), compiled code refused, files no wheel ships skipped."""

from __future__ import annotations

import pytest
from support import BASE, change, commit_tree, git, make_series, make_wheel, patched_files
from vpatch import quilt
from vpatch.errors import PatchError, WheelError
from vpatch.wheel import file, patch

MODEL = BASE["vllm/model.py"]


def test_patched_files(whl, wheel_series):
    got = patched_files(whl, wheel_series)
    assert got == {
        "vllm/model.py": change(MODEL, "line 5\n", "line 5ive\n").encode(),
        "vllm/config.py": b"allow = ['llama', 'deepseek']\n",
        "vllm/eagle3.py": b"AUX = (2, 20, 37)\n",
    }


def test_classify_ships_package_files_and_skips_the_rest(whl, wheel_series):
    with file.WheelFile.open(whl) as w:
        shipped, skipped = patch.classify(wheel_series, w)
    # eagle3.py is new, but in the wheel's package: it ships
    assert shipped == ["vllm/model.py", "vllm/config.py", "vllm/eagle3.py"]
    assert skipped == ["README.md"]


@pytest.mark.parametrize(
    "path", ["csrc/ops.cu", "cmake/utils.cmake", "CMakeLists.txt", "tests/kernels/x.cpp", "a/b.h"]
)
def test_compiled_code_is_refused(tmp_path, whl, path):
    d = make_series(tmp_path, {path: "// a\n", **BASE}, [("kernel", {path: "// b\n"})])
    with file.WheelFile.open(whl) as w, pytest.raises(WheelError, match=f"{path} .*--mode source"):
        patch.classify(quilt.load(d), w)


def test_deleted_and_unchanged_files(tmp_path, whl):
    work = commit_tree(tmp_path / "w", BASE)
    git(work, "rm", "-q", "vllm/config.py")
    (work / "vllm/model.py").write_text(BASE["vllm/model.py"] + "extra\n")
    git(work, "commit", "-qam", "drop config, grow model")
    (work / "vllm/model.py").write_text(BASE["vllm/model.py"])
    git(work, "commit", "-qam", "shrink model again")
    sd = tmp_path / "s"
    sd.mkdir()
    names = []
    for i, sha in enumerate(git(work, "rev-list", "--reverse", "HEAD~2..HEAD").split(), 1):
        names.append(f"{i:04d}-p.patch")
        (sd / names[-1]).write_text(git(work, "format-patch", "--stdout", "-1", sha))
    (sd / "series").write_text("\n".join(names) + "\n")
    with file.WheelFile.open(whl) as w:
        out = patch.apply_series(w, quilt.load(sd))
    assert out.deleted == ["vllm/config.py"]
    assert out.changed == {}  # model.py came back to what the wheel has


def test_the_patch_that_fails_is_named(tmp_path, wheel_series):
    # model.py as the series expects it, config.py not: the second patch fails
    other = make_wheel(
        tmp_path / "other",
        files={"vllm/model.py": MODEL.encode(), "vllm/config.py": b"allow = []\n"},
    )
    with file.WheelFile.open(other) as w, pytest.raises(PatchError) as e:
        patch.apply_series(w, wheel_series)
    assert str(e.value).startswith(f"0002-step-2.patch does not apply to {other.name}: ")
    assert "\n" not in str(e.value)


def test_the_failure_names_the_file(tmp_path, wheel_series):
    other = make_wheel(
        tmp_path / "other",
        files={"vllm/model.py": change(MODEL, "line 3\n", "line three\n").encode()},
    )
    with file.WheelFile.open(other) as w, pytest.raises(PatchError) as e:
        patch.apply_series(w, wheel_series)
    assert str(e.value).startswith(f"0001-step-1.patch does not apply to {other.name}: ")
    assert "vllm/model.py" in str(e.value)


def test_a_series_of_files_no_wheel_ships_changes_nothing(tmp_path, whl):
    d = make_series(tmp_path, BASE, [("docs", {"README.md": "more\n", "docs/x.md": "x\n"})])
    with file.WheelFile.open(whl) as w:
        out = patch.apply_series(w, quilt.load(d))
    assert (out.changed, out.deleted, out.skipped) == ({}, [], ["README.md", "docs/x.md"])
