"""cli/carry.py: `vpatch carry` prints the report; a conflict is one error
line naming the file, its lines and the command that goes on (exit 5)."""

from pathlib import Path

from vpatch import cli
from vpatch.commands import carry
from vpatch.errors import PatchError


def test_a_conflict_is_one_line_with_the_way_on(monkeypatch, capsys, tmp_path):
    out = carry.Carried("0.30.0", "0.31.0", Path("w"), conflict="0003-c.patch", work_given=True)
    out.hunks = {"vllm/u.py": ["lines 40-52"]}
    seen = []
    monkeypatch.setattr(carry, "carry", lambda to, **kw: seen.append((to, kw)) or out)
    assert cli.main(["carry", "0.31.0", "--work", "w", "--write"]) == PatchError.exit_code
    printed, err = capsys.readouterr()
    assert printed.startswith("# vpatch carry 0.30.0 -> 0.31.0")
    assert err.count("\n") == 1
    assert "0003-c.patch conflicts with vLLM 0.31.0 in vllm/u.py (lines 40-52)" in err
    assert "`vpatch carry 0.31.0 --work w --continue`" in err
    to, kw = seen[0]
    assert to == "0.31.0" and kw["work"] == Path("w") and kw["write"] and not kw["resume"]
    assert kw["extra"][0].name == "commands"  # the README's command list, for the docs


def test_write_with_lint_problems_fails(monkeypatch, capsys, tmp_path):
    out = carry.Carried("0.32.0", "0.33.0", tmp_path / "w", problems=["p"])
    monkeypatch.setattr(carry, "carry", lambda to, **kw: out)
    assert cli.main(["carry", "0.33.0", "--write"]) == PatchError.exit_code
    assert "lint found 1 problems; nothing was written" in capsys.readouterr().err
    assert cli.main(["carry", "0.33.0"]) == 0
