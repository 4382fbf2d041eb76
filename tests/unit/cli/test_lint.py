"""cli/lint.py: `vpatch lint` lists the problems (stdout) and the skipped
releases (stderr); problems are exit 5."""

from vpatch import cli
from vpatch.errors import PatchError
from vpatch.maintain import lint


def test_problems_are_listed_and_exit_5(monkeypatch, capsys):
    found = lint.Linted(
        [lint.Problem("a", "p1"), lint.Problem("b", "p2")], ["9.9.1: not in the cache"]
    )
    monkeypatch.setattr(lint, "lint", lambda pins, offline, say: found)
    assert cli.main(["lint", "--offline"]) == PatchError.exit_code == 5
    out, err = capsys.readouterr()
    assert out == "a: p1\nb: p2\n"
    assert err.splitlines() == [
        "skipped: 9.9.1: not in the cache",
        "vpatch: error: lint found 2 problems (listed above)",
    ]
    found.problems.clear()
    assert cli.main(["lint"]) == 0
    assert capsys.readouterr().out == "lint: every series is consistent and up to date\n"
