"""commands/pr.py: `vpatch pr` through the CLI, over pr/draft.py (tested in
tests/unit/pr/), on the synthetic releases and checkouts of support.pr:
what the adapter is given reaches the engine, and what it returns is
printed (nothing to send, a conflict and --continue)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import change, git
from support import pr as world
from support.pr import FIVE, FIX, FIXED, SIGNOFF, UPSTREAM, checkout, kw
from vpatch import cli, gitutil
from vpatch.errors import PatchError, TreeError
from vpatch.pr import draft as engine

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
