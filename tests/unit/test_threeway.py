"""threeway.py: two insertions at one place merged, anything else left to
a person, and the conflicts git left in a file named by their lines. (The
3-way carry itself runs in every port and pr test: tests/unit/maintain/
test_port.py, tests/unit/pr/test_draft.py.)"""

from __future__ import annotations

import pytest
from vpatch import threeway

# -- merging two insertions at one place (port, pr) ------------------------------------


def conflict(ours: str, base: str, theirs: str) -> str:
    return f"head\n<<<<<<< ours\n{ours}||||||| base\n{base}=======\n{theirs}>>>>>>> theirs\ntail\n"


def test_two_insertions_keep_ours_then_theirs():
    assert threeway.union_insertions(conflict("a\n", "", "b\n")) == "head\na\nb\ntail\n"


@pytest.mark.parametrize(
    "text",
    [
        conflict("a\n", "old\n", "b\n"),  # a side changed lines
        "head\n<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n",  # no base: not diff3
        "head\n<<<<<<< ours\na\n||||||| base\n=======\nb\n",  # unterminated
        "no conflict at all\n",
    ],
    ids=["changed", "no-base", "unterminated", "none"],
)
def test_anything_else_is_left_to_a_person(text):
    assert threeway.union_insertions(text) is None


def test_conflicts_are_named_by_their_lines(tmp_path):
    f = tmp_path / "utils.py"
    f.write_text(
        "a\n<<<<<<< ours\nb\n||||||| base\nc\n=======\nd\n>>>>>>> theirs\ne\n<<<<<<< x\n>>>>>>> y\n"
    )
    assert threeway.hunks(f) == ["lines 2-8", "lines 10-11"]
    assert threeway.hunks(tmp_path / "gone.py") == []
