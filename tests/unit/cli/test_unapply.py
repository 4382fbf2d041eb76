"""cli/unapply.py: `vpatch unapply` says how many commits it removed."""

from pathlib import Path

import pytest
from vpatch import cli
from vpatch.commands import apply


@pytest.mark.parametrize(("n", "said"), [(1, "1 commit removed"), (3, "3 commits removed")])
def test_counts_the_commits(monkeypatch, capsys, n, said):
    seen = []

    def fake(dest, series, discard, pins):
        seen.append((dest, series, discard))
        return apply.Unapplied(dest, "9.9.0", n)

    monkeypatch.setattr(apply, "unapply", fake)
    assert cli.main(["unapply", "t", "--discard-commits"]) == 0
    assert capsys.readouterr().out == f"t: back to the vLLM 9.9.0 baseline ({said})\n"
    assert seen == [(Path("t"), None, True)]
