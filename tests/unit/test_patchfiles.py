"""patchfiles.py: a series applied to copies of the files asked for, the
other files it touches left out, and a patch that does not apply named."""

from __future__ import annotations

import pytest
from support import BASE, change, commit_tree, git, make_series
from vpatch import patchfiles, quilt
from vpatch.errors import PatchError

MODEL = BASE["vllm/model.py"]
FIVE = change(MODEL, "line 5\n", "line five\n")


@pytest.fixture
def series(tmp_path) -> quilt.Series:
    steps = [
        ("model: five, and the readme", {"vllm/model.py": FIVE, "README.md": "bigger\n"}),
        ("eagle3: new file", {"vllm/eagle3.py": "AUX = (2, 20, 37)\n"}),
        ("readme only", {"README.md": "biggest\n"}),
    ]
    return quilt.load(make_series(tmp_path, BASE, steps))


def test_the_files_asked_for_are_patched_the_others_left_out(series):
    files = {"vllm/model.py": MODEL.encode(), "vllm/config.py": b"allow = ['llama']\n"}
    only = ["vllm/model.py", "vllm/eagle3.py", "vllm/config.py"]
    got = patchfiles.apply(series, files, only, "the wheel")
    # README.md is no file of `only`: its hunks are not applied (it is not
    # there), and the third patch, which touches it alone, is passed over
    assert got == {
        "vllm/model.py": FIVE.encode(),
        "vllm/eagle3.py": b"AUX = (2, 20, 37)\n",  # created by the series
        "vllm/config.py": b"allow = ['llama']\n",  # no patch changes it
    }


def test_a_file_the_series_removes_is_not_returned(tmp_path):
    work = commit_tree(tmp_path / "w", BASE)
    git(work, "rm", "-q", "vllm/config.py")
    git(work, "commit", "-qm", "config: gone")
    (tmp_path / "s").mkdir()
    (tmp_path / "s/0001-gone.patch").write_text(git(work, "format-patch", "--stdout", "-1"))
    (tmp_path / "s/series").write_text("0001-gone.patch\n")
    files = {"vllm/config.py": BASE["vllm/config.py"].encode()}
    assert patchfiles.apply(quilt.load(tmp_path / "s"), files, ["vllm/config.py"], "x") == {}


def test_a_patch_that_does_not_apply_is_named_with_the_target(series):
    files = {"vllm/model.py": change(MODEL, "line 5\n", "line 5 moved on\n").encode()}
    with pytest.raises(PatchError, match=r"^0001-step-1\.patch does not apply to vllm 9\.9\.0: "):
        patchfiles.apply(series, files, ["vllm/model.py"], "vllm 9.9.0")
