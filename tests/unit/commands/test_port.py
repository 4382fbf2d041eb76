"""commands/port.py: `vpatch port` is maintain/port.py's engine itself
(tested in tests/unit/maintain/test_port.py), not a copy of its signature
that could drop an argument."""

from __future__ import annotations

from vpatch.commands import port
from vpatch.maintain import port as engine


def test_the_command_is_the_engine():
    assert port.port is engine.port
    assert port.resume is engine.resume
    assert port.Ported is engine.Ported
