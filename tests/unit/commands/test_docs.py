"""commands/docs.py: `vpatch docs` over maintain/docs.py (tested in
tests/unit/maintain/test_docs.py): the root, the lock and the CLI's own
parts reach the engine."""

from __future__ import annotations

from pathlib import Path

from vpatch.commands import docs
from vpatch.maintain import docs as engine


def test_every_argument_reaches_the_engine(monkeypatch):
    seen = []
    monkeypatch.setattr(engine, "stale", lambda root, **kw: seen.append((root, kw)) or ["a"])
    monkeypatch.setattr(engine, "write", lambda root, **kw: seen.append((root, kw)) or ["b"])
    pins, extra = object(), (engine.Block("README.md", "x", "t"),)
    assert docs.stale(Path("r"), pins=pins, extra=extra) == ["a"]  # type: ignore[arg-type]
    assert docs.write(Path("r"), pins=pins, extra=extra) == ["b"]  # type: ignore[arg-type]
    assert seen == [(Path("r"), dict(pins=pins, extra=extra))] * 2
