"""cli/carry.py: `vpatch carry` prints the report; a conflict is one error
line naming the file, its lines and the command that goes on (exit 5)."""

from pathlib import Path

from support import next_release
from support.releases import PINS, last_pin
from vpatch import cli
from vpatch.commands import carry
from vpatch.errors import PatchError

# a carry of the next release from the newest pinned (the carry itself is stood in for)
FRM, TO = last_pin(), next_release(PINS)


def test_a_conflict_is_one_line_with_the_way_on(monkeypatch, capsys, tmp_path):
    out = carry.Carried(FRM, TO, Path("w"), conflict="0003-c.patch", work_given=True)
    out.hunks = {"vllm/u.py": ["lines 40-52"]}
    seen = []
    monkeypatch.setattr(carry, "carry", lambda to, **kw: seen.append((to, kw)) or out)
    assert cli.main(["carry", TO, "--work", "w", "--write"]) == PatchError.exit_code
    printed, err = capsys.readouterr()
    assert printed.startswith(f"# vpatch carry {FRM} -> {TO}")
    assert err.count("\n") == 1
    assert f"0003-c.patch conflicts with vLLM {TO} in vllm/u.py (lines 40-52)" in err
    assert f"`vpatch carry {TO} --work w --continue`" in err
    to, kw = seen[0]
    assert to == TO and kw["work"] == Path("w") and kw["write"] and not kw["resume"]
    assert kw["extra"][0].name == "commands"  # the README's command list, for the docs


def test_write_with_lint_problems_fails(monkeypatch, capsys, tmp_path):
    out = carry.Carried(FRM, TO, tmp_path / "w", problems=["p"])
    monkeypatch.setattr(carry, "carry", lambda to, **kw: out)
    assert cli.main(["carry", TO, "--write"]) == PatchError.exit_code
    assert "lint found 1 problems; nothing was written" in capsys.readouterr().err
    assert cli.main(["carry", TO]) == 0
