"""commands/port.py: `vpatch port` over maintain/port.py (tested in
tests/unit/maintain/test_port.py): what the command is given reaches the
engine, and the engine's report comes back."""

from __future__ import annotations

from pathlib import Path

from vpatch.commands import port
from vpatch.maintain import port as engine


def test_every_argument_reaches_the_engine(monkeypatch, tmp_path):
    seen = []
    report = engine.Ported("9.8.0", "10.0.0", tmp_path)
    monkeypatch.setattr(engine, "port", lambda *a, **kw: seen.append((a, kw)) or report)
    monkeypatch.setattr(engine, "resume", lambda *a, **kw: seen.append((a, kw)) or report)
    pins, say = object(), print
    given = dict(work=Path("w"), into=Path("i"), from_source="sdist", to_source="wheel")
    r = port.port("9.8.0", "10.0.0", pins=pins, offline=True, keep=True, say=say, **given)  # type: ignore[arg-type]
    assert r is report
    assert seen[0] == (
        ("9.8.0", "10.0.0"),
        dict(pins=pins, offline=True, keep=True, say=say, **given),
    )
    assert port.resume("9.8.0", "10.0.0", pins=pins, work=Path("w"), keep=True) is report  # type: ignore[arg-type]
    assert seen[1] == (("9.8.0", "10.0.0"), dict(pins=pins, work=Path("w"), into=None, keep=True))
