"""A real port: 0.16.0's series carried to 0.17.1 gives the committed series."""

from __future__ import annotations

import pytest
from support import series_of
from vpatch import lock, patchset, series
from vpatch.commands import port

pytestmark = pytest.mark.integration

PINS = lock.load()
NEWEST = PINS.default()


def test_port_016_to_0171_reproduces_the_committed_series(tmp_path):
    before = PINS.path.read_bytes()
    r = port.port("0.16.0", "0.17.1", pins=PINS, work=tmp_path / "work", into=tmp_path / "out")
    assert r.conflict is None
    assert PINS.path.read_bytes() == before  # 0.17.1 is pinned with a series: lock untouched
    old = series_of(PINS, PINS.get("0.16.0")).patches
    committed = series_of(PINS, NEWEST).patches
    ported = series.load(tmp_path / "out").patches
    assert [p.name for p in ported] == [p.name for p in committed]
    for o, c, p in zip(old, committed, ported, strict=True):
        assert p.changes() == c.changes(), p.name
        assert p.message == o.message  # a port keeps FROM's message
        if o.message == c.message:  # where it sits and blob ids aside, the committed file
            assert patchset.same_change(p.path.read_bytes(), c.path.read_bytes()), p.name
