"""cli/lint.py: `vpatch lint` lists the problems (stdout) and the skipped
releases (stderr); problems are exit 5."""

from types import SimpleNamespace

from vpatch import cli
from vpatch.errors import PatchError
from vpatch.maintain import lint


def test_problems_are_listed_and_exit_5(monkeypatch, capsys):
    found = SimpleNamespace(problems=["p1", "p2"], skipped=["9.9.1: not in the cache"])
    monkeypatch.setattr(lint, "lint", lambda pins, offline, say: found)
    assert cli.main(["lint", "--offline"]) == PatchError.exit_code == 5
    out, err = capsys.readouterr()
    assert out == "p1\np2\n"
    assert err.splitlines() == [
        "skipped: 9.9.1: not in the cache",
        "vpatch: error: lint found 2 problems (listed above)",
    ]
    found.problems.clear()
    assert cli.main(["lint"]) == 0
    assert capsys.readouterr().out == "lint: every series is consistent and up to date\n"
