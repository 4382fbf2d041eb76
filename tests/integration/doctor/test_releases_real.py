"""The per-release facts `vpatch doctor` checks pairs against
(vpatch/doctor/releases.py) re-read from every pinned release's own source
(sdists for 0.16.0+, the wheel's Python files for 0.15.x, from the cache):
the table must say what the code does, release by release. Each fact is
read by its probe (vpatch/doctor/facts.py, which a carry runs on a
new release); the tests below check what doctor takes as the same in every
release."""

from __future__ import annotations

import pytest
from vpatch import lock, probes
from vpatch.doctor import facts, releases
from vpatch.sources import files

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=releases.known_releases(lock.load()))
def src(request):
    globs = facts.globs()
    tree = files.release_files(lock.load().get(request.param), globs)
    return request.param, probes.folder_files(tree, globs)


def test_rules_agree_with_their_probes(src):
    """Every fact of RULES that a probe reads (doctor/facts.py) is what the
    release's source says (bites: RULES' 0.30.0 entry without
    d2t_only_if_vocab_differs fails 0.30.0-0.33.0)."""
    v, got = src
    assert facts.differences(facts.read(got), lock.load().rules.at(v)) == {}


def test_what_doctor_takes_as_the_same_holds(src):
    """Every fact doctor writes once for all releases (facts.SAME) holds
    (bites: "num_layers - 3" read as "num_layers - 2" fails every release
    from 0.18.0)."""
    _, got = src
    assert facts.broken(got) == []
