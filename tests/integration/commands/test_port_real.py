"""A real port: 0.16.0's series carried to 0.17.1, with the one conflict a
person resolves (the attention-backend fix: 0.17.0 adds a line to its
context), gives the committed series."""

from __future__ import annotations

import pytest
from support import git, series_of
from vpatch import lock, patchset, quilt
from vpatch.commands import apply
from vpatch.maintain import port

pytestmark = pytest.mark.integration

PINS = lock.load()
NEWEST = PINS.default()


def test_port_016_to_0171_reproduces_the_committed_series(tmp_path):
    before = PINS.path.read_bytes()
    work = tmp_path / "work"
    r = port.port("0.16.0", "0.17.1", pins=PINS, work=work, into=tmp_path / "out")
    # 0.17.0 passes load_config to the drafter's get_model: the variant of
    # 0.16.0 does not merge; resolved as 0.17.1's committed series has it
    assert r.conflict == "0006-spec-decode-the-drafter-selects-its-own-attention-backend.patch"
    assert r.unresolved == ["vllm/v1/spec_decode/eagle.py"]
    committed_tree = tmp_path / "committed"
    apply.apply("0.17.1", dest=committed_tree, pins=lock.load())
    for f in r.unresolved:
        (work / f).write_text((committed_tree / f).read_text())
        git(work, "add", f)
    git(work, "am", "--continue")
    r = port.resume("0.16.0", "0.17.1", pins=PINS, work=work, into=tmp_path / "out")
    assert r.conflict is None
    assert PINS.path.read_bytes() == before  # 0.17.1 is pinned with a series: lock untouched
    old = series_of(PINS, PINS.get("0.16.0")).patches
    committed = series_of(PINS, NEWEST).patches
    ported = quilt.load(tmp_path / "out").patches
    assert [p.name for p in ported] == [p.name for p in committed]
    for o, c, p in zip(old, committed, ported, strict=True):
        assert p.changes() == c.changes(), p.name
        assert p.message == o.message  # a port keeps FROM's message
        if o.message == c.message:  # where it sits and blob ids aside, the committed file
            assert patchset.same_change(p.path.read_bytes(), c.path.read_bytes()), p.name
