"""cli/pr.py: `vpatch pr` prints the draft, the commands that open the pull
request, and on a conflict the command that goes on, with its options."""

from pathlib import Path
from types import SimpleNamespace

from vpatch import cli
from vpatch.commands import pr
from vpatch.errors import PatchError


def draft(**kw):
    base = dict(
        report=lambda: ["  sent  a"],
        conflict=None,
        sent=["a", "b"],
        target="vLLM 9.9.0",
        tree=Path("t"),
        branch="eagle3",
        out=None,
        title="[Spec Decode] a",
        commands=["git push", "gh pr create"],
        unresolved=[],
    )
    return SimpleNamespace(**{**base, **kw})


def test_a_draft_says_where_it_is_and_what_opens_it(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(pr, "draft", lambda onto, **kw: seen.append((onto, kw)) or draft())
    assert cli.main(["pr", "--onto", "9.9.0", "--patch", "a", "--patch", "b"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "  sent  a",
        "t: branch eagle3, 2 commits on vLLM 9.9.0",
        "pr/PR_BODY.md, pr/series/: [Spec Decode] a",
        "nothing was pushed; to open the pull request:",
        "  git push",
        "  gh pr create",
    ]
    assert seen[0][0] == "9.9.0" and seen[0][1]["only"] == ("a", "b")


def test_a_conflict_names_the_command_that_goes_on(monkeypatch, capsys):
    stuck = draft(conflict=SimpleNamespace(patch=SimpleNamespace(name="0001-a.patch")))
    stuck.unresolved = ["vllm/x.py"]
    monkeypatch.setattr(pr, "resume", lambda onto, **kw: stuck)
    argv = ["pr", "--onto", "9.9.0", "--out", "o", "--signoff", "A <a@b>", "--continue"]
    assert cli.main(argv) == PatchError.exit_code
    err = capsys.readouterr().err
    assert "0001-a.patch conflicts with vLLM 9.9.0 in vllm/x.py" in err
    assert "`vpatch pr --onto 9.9.0 --out 'o' --signoff 'A <a@b>' --continue`" in err
