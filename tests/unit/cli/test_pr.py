"""cli/pr.py: `vpatch pr` prints the draft, the commands that open the pull
request, and on a conflict the command that goes on, with its options; and,
over pr/draft.py (tested in tests/unit/pr/) on the synthetic releases and
checkouts of support.pr, nothing to send and a conflict then --continue."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from support import change, git
from support import pr as world
from support.pr import FIVE, FIX, FIXED, SIGNOFF, UPSTREAM, checkout, kw
from vpatch import cli, gitutil
from vpatch.errors import PatchError, TreeError
from vpatch.pr import draft as engine
from vpatch.pr.candidates import Candidate


def drafted(*statuses: str, **kw) -> engine.Drafted:
    """A draft of a patch a status (clean: sent), as pr/draft.py makes it."""
    cands = [
        Candidate(SimpleNamespace(name=f"000{i}-{s}.patch"), "9.9.0", f"t{i}", s)
        for i, s in enumerate(statuses or ("clean", "merged"), 1)
    ]
    d = engine.Drafted("9.9.0", "vLLM 9.9.0", Path("t"), cands, branch="eagle3")
    d.title, d.commands = "[Spec Decode] a", ["git push", "gh pr create"]
    for k, v in kw.items():
        setattr(d, k, v)
    return d


def test_a_draft_says_where_it_is_and_what_opens_it(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(engine, "draft", lambda onto, **kw: seen.append((onto, kw)) or drafted())
    assert cli.main(["pr", "--onto", "9.9.0", "--patch", "a", "--patch", "b"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "  clean     0001-clean.patch (9.9.0): t1",
        "  merged    0002-merged.patch (9.9.0): t2",
        "t: branch eagle3, 2 commits on vLLM 9.9.0",
        "pr/PR_BODY.md, pr/series/: [Spec Decode] a",
        "nothing was pushed; to open the pull request:",
        "  git push",
        "  gh pr create",
    ]
    assert seen[0][0] == "9.9.0" and seen[0][1]["only"] == ("a", "b")


def test_a_conflict_names_the_command_that_goes_on(monkeypatch, capsys):
    stuck = drafted("clean", "conflict", unresolved=["vllm/x.py"])
    monkeypatch.setattr(engine, "resume", lambda onto, **kw: stuck)
    argv = ["pr", "--onto", "9.9.0", "--out", "o", "--signoff", "A <a@b>", "--continue"]
    assert cli.main(argv) == PatchError.exit_code
    out, err = capsys.readouterr()
    assert out.splitlines() == [  # each patch; nothing to open: it stopped
        "  clean     0001-clean.patch (9.9.0): t1",
        "  conflict  0002-conflict.patch (9.9.0)",
    ]
    assert "0002-conflict.patch conflicts with vLLM 9.9.0 in vllm/x.py" in err
    assert "`vpatch pr --onto 9.9.0 --out 'o' --signoff 'A <a@b>' --continue`" in err


root = world.root  # the fixture (support.pr)


def test_nothing_left_says_so_and_exits_0(root, tmp_path, monkeypatch, capsys):
    co = checkout(tmp_path / "vllm", {**UPSTREAM, "vllm/model.py": FIXED})
    real = engine.draft
    monkeypatch.setattr(engine, "draft", lambda onto, **a: real(onto, **{**a, **kw(root)}))
    assert cli.main(["pr", "--onto", str(co), "--signoff", SIGNOFF]) == 0
    out = capsys.readouterr().out
    assert "nothing to send" in out
    assert out.count("upstream since 9.9.0") == 2 and "upstream (the target has it)" in out
    assert git(co, "branch", "--format=%(refname:short)").split() == ["main"]
    assert not Path("pr").exists()


def test_conflict_is_left_for_a_person_then_continued(root, tmp_path, monkeypatch, capsys):
    theirs = change(FIVE, "v30 = 30\n", "v30 = thirty()\n")
    co = checkout(tmp_path / "vllm", {**UPSTREAM, "vllm/model.py": theirs})
    real = engine.draft
    monkeypatch.setattr(engine, "draft", lambda onto, **a: real(onto, **{**a, **kw(root)}))
    code = cli.main(["pr", "--onto", str(co), "--signoff", SIGNOFF])
    assert code == PatchError.exit_code
    out, err = capsys.readouterr()
    assert f"  conflict  {FIX} (10.0.0)" in out
    assert len(err.strip().splitlines()) == 1
    assert f"{FIX} conflicts with" in err and "in vllm/model.py" in err
    assert "git am --continue" in err and "--continue`" in err
    assert gitutil.am_in_progress(gitutil.open_repo(co))  # left for a person
    assert "<<<<<<<" in (co / "vllm/model.py").read_text()
    assert not Path("pr").exists()
    with pytest.raises(TreeError, match="git am is still in progress"):
        engine.resume(str(co), **kw(root))
    (co / "vllm/model.py").write_text(change(FIVE, "v30 = 30\n", "v30 = fixed(thirty())\n"))
    git(co, "add", "vllm/model.py")
    git(co, "am", "--continue")
    d = engine.resume(str(co), out=tmp_path / "out", **kw(root))
    assert [c.status for c in d.candidates] == ["left out", "left out", "ported"]
    assert git(co, "log", "-1", "--format=%s").strip() == d.candidates[2].title
    assert f"Signed-off-by: {SIGNOFF}" in git(co, "log", "-1", "--format=%B")
    assert (tmp_path / "out/series/series").read_text().count(".patch") == 1
