"""commands/lint.py: `vpatch lint` over maintain/lint.py (tested in
tests/unit/maintain/test_lint.py): what the command is given reaches the
engine, and its findings come back."""

from __future__ import annotations

from vpatch.commands import lint
from vpatch.maintain import lint as engine


def test_every_argument_reaches_the_engine(monkeypatch):
    seen = []
    found = engine.Linted()
    monkeypatch.setattr(engine, "lint", lambda pins, **kw: seen.append((pins, kw)) or found)
    pins = object()
    assert lint.lint(pins, offline=True, say=print) is found  # type: ignore[arg-type]
    assert seen == [(pins, dict(offline=True, say=print))]
