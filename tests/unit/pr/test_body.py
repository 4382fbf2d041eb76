"""pr/body.py: the commits' messages, the pull request's title and PR_BODY.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import pr as world
from vpatch import quilt
from vpatch.errors import ConfigError
from vpatch.pr import body
from vpatch.pr.candidates import Candidate

root = world.root  # the fixture (support.pr)


def test_results_are_read_per_release_with_their_date(tmp_path):
    side = {"passed": ["t"], "failed": []}
    path = tmp_path / "results.json"
    sides = {"unpatched": side, "patched": side}
    path.write_text(json.dumps({"when": "2026-12-02", "releases": {"9.9.1": sides}}))
    got = body.load_results(path)
    assert got == {"9.9.1": {"unpatched": side, "patched": side, "when": "2026-12-02"}}


@pytest.mark.parametrize(
    "text", ['{"release": "10.0.0"}', '{"releases": {"10.0.0": {"unpatched": {"passed": [1]}}}}']
)
def test_results_in_another_shape_are_refused(tmp_path, text):
    (tmp_path / "results.json").write_text(text)
    with pytest.raises(ConfigError, match="not the tier's results"):
        body.load_results(tmp_path / "results.json")


def test_missing_results_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="--results .*missing.json"):
        body.load_results(tmp_path / "missing.json")


def patch(subject: str, text: str, files: list[str]) -> quilt.Patch:
    fields = quilt.dep3(text)
    return quilt.Patch("x.patch", Path("x.patch"), "", "", subject, text, fields, files, None)


TEXT = """Take a copy of the embedding at layer 0.

Description: fix the aux hidden state at layer 0
Origin: vendor
Forwarded: no
Last-Update: 2026-01-02
"""


def test_message_keeps_the_prose_and_signs_off():
    c = Candidate(patch("model: fix layer 0", TEXT, []), "10.0.0", "[Bugfix] fix layer 0")
    msg = body.message(c, ("Jane Doe", "jane@example.invalid"))
    assert msg == (
        "[Bugfix] fix layer 0\n\nTake a copy of the embedding at layer 0.\n\n"
        "Signed-off-by: Jane Doe <jane@example.invalid>\n"
    )


def test_title_of_several_commits_merges_their_tags():
    assert body.pr_title(["[Bugfix][Model] a", "[Spec Decode] b"]) == (
        "[Bugfix][Model][Spec Decode] a (+1 more)"
    )
    assert body.pr_title(["[Misc] only"]) == "[Misc] only"


def test_body_without_tests_or_a_release_to_run_claims_nothing():
    c = Candidate(patch("model: fix layer 0", TEXT, ["vllm/model.py"]), "10.0.0", "[Bugfix] x")
    text = body.body([c], None, None, [])
    assert "Fix the aux hidden state at layer 0." in text  # the Description, as a sentence
    assert "No test covers this change yet." in text and "Not run yet." in text
    assert "- [ ] The test results" in text and "Origin:" not in text


@pytest.mark.parametrize(
    "name",
    [
        "t\n\n## Injected heading",
        "t\r\n- [x] tested on a GPU",
        "t\u2028## Injected",
        "t\x1b[31m",
    ],
)
def test_results_whose_text_would_break_out_of_its_line_are_refused(tmp_path, name):
    """PR_BODY.md quotes each test name inside one line (`- \\`name\\``): a name
    with a line break injected a heading (or a ticked checklist item) of its
    own. A results file with one, in a test name or in `when`,
    is not the tier's: refused, one line, exit 2 from the CLI."""
    good = {"passed": ["t"], "failed": []}
    for where in ("failed", "when"):
        sides = {"unpatched": {"passed": [], "failed": [name]}, "patched": good}
        data = {"when": "2026-12-02", "releases": {"9.9.1": sides}}
        if where == "when":
            data = {"when": name, "releases": {"9.9.1": {"unpatched": good, "patched": good}}}
        (tmp_path / "results.json").write_text(json.dumps(data))
        with pytest.raises(ConfigError, match="has a line break or a control character") as e:
            body.load_results(tmp_path / "results.json")
        assert "\n" not in str(e.value) and "\r" not in str(e.value)
