"""shown.py: a result says itself; its text is its lines, and only a
result that has a JSON form gives one."""

from dataclasses import dataclass

import pytest
from vpatch.shown import Shown


@dataclass
class Said(Shown):
    said: list[str]

    def lines(self) -> list[str]:
        return self.said


def test_the_text_is_the_lines_as_read():
    """to_text joins the lines and escapes nothing: a file or a test reads
    what was said (the CLI escapes as it shows: cli.options.show)."""
    assert Said(["a", "b\x1b[2J"]).to_text() == "a\nb\x1b[2J"
    assert Said([]).to_text() == ""


def test_a_result_without_a_json_form_says_so():
    with pytest.raises(TypeError, match="Said has no JSON form"):
        Said(["a"]).to_json()
    with pytest.raises(NotImplementedError):
        Shown().lines()
