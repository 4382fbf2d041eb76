"""maintain/reading.py: a new release's doctor facts against the one before
(changed, unreadable with where the code went, settled) and every patch's
probe, read from the cache (stood in for here by folders of stub files)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import write_tree
from support.facts import every_anchor, path_of, stub, without
from vpatch import lock
from vpatch.maintain import reading
from vpatch.releasefacts import anchors, facts

PINS = lock.load()
FROM, TO = PINS.versions()[-2:]
EVERY = every_anchor()


@pytest.fixture
def trees(tmp_path, monkeypatch):
    """{release: {path: text}} the stand-in cache serves."""
    served: dict[str, dict[str, str]] = {}

    def release_files(rel, globs, **kw) -> Path:
        return write_tree(tmp_path / rel.version, served.get(rel.version, {}))

    monkeypatch.setattr(reading, "release_files", release_files)
    return served


def test_the_same_code_is_settled_or_changed_but_never_unreadable(trees):
    trees[FROM] = trees[TO] = EVERY
    got = reading.read_facts(PINS, FROM, TO)
    assert got.unreadable == {}
    # stubs read as no feature at all: what differs from TO's rules is changed
    assert got.changed == facts.differences(facts.read(EVERY).values, PINS.rules.at(TO))
    assert got.settled == (not got.changed and not got.broken)


def test_code_gone_is_unreadable_with_where_it_went_and_no_value(trees):
    a = anchors.Anchor(facts.FILES["v1"], "GPUModelRunner._get_eagle3_aux_layers_from_config")
    after = without(EVERY, a)
    after["vllm/v1/worker/elsewhere.py"] = stub("Helper._get_eagle3_aux_layers_from_config")
    trees[FROM], trees[TO] = EVERY, after
    got = reading.read_facts(PINS, FROM, TO)
    u = got.unreadable["v1_reads_nested_ids"]
    assert a in u.missing and u.before == PINS.rules.at(TO).v1_reads_nested_ids
    assert u.moved[str(a)] == [
        "vllm/v1/worker/elsewhere.py defines _get_eagle3_aux_layers_from_config"
    ]
    assert "v1_reads_nested_ids" not in got.changed and not got.settled


def test_a_file_gone_is_searched_by_name(trees):
    path = path_of(facts.FILES["v2_loader"])
    after = {p: t for p, t in EVERY.items() if p != path}
    trees[FROM], trees[TO] = EVERY, after
    got = reading.read_facts(PINS, FROM, TO)
    # the other file of its name the probes read (config/utils.py: spec_extra)
    assert got.unreadable["forced_backend_crash"].moved[path] == [
        path_of(facts.FILES["config_utils"])
    ]


def test_a_probe_whose_file_went_away_says_code_gone():
    c = reading.probes.Check(file="vllm/z.py", uses="baz")
    assert reading.verdict([c], {"vllm/z.py": "baz()\n"}) == "has it"
    assert reading.verdict([c], {"vllm/z.py": "x\n"}) == "lacks it"
    assert reading.verdict([c], {}) == "code gone"


def test_serving_facts_changed_and_unreadable(trees, monkeypatch):
    """serving.toml's facts as releasefacts/modelcode.py reads FROM and TO:
    one value that differs from the table folded at TO is changed; an anchor
    FROM has and TO lacks makes its keys unreadable, with no value (bites:
    read_facts without its serving part is settled here)."""
    trees[FROM] = trees[TO] = EVERY
    table = PINS.serving
    want = table.expected(TO)
    key = next(k for k in want if k.startswith("route "))
    a = anchors.Anchor("vllm/models/x/__init__.py", "the platform dispatch for rocm")
    unread = next(k for k in want if k.startswith("file "))

    def read(files, t):
        r = facts.Reading(values=dict(want))
        r.values[key] = "elsewhere.py:A"
        r.anchors = {k: {} for k in want}
        r.anchors[unread] = {a: files is not trees_after[0]}
        return r

    trees_after = [None]
    real_files_of = reading.files_of

    def files_of(pins, v, globs, say=None):
        got = real_files_of(pins, v, globs)
        if v == TO and globs == reading.modelcode.globs(table):
            trees_after[0] = got
        return got

    monkeypatch.setattr(reading, "files_of", files_of)
    monkeypatch.setattr(reading.modelcode, "read", read)
    got = reading.read_facts(PINS, FROM, TO)
    assert got.serving == {key: (want[key], "elsewhere.py:A")}
    assert set(got.serving_unreadable) == {unread} and not got.settled
    assert got.serving_unreadable[unread].before == table.expected(FROM)[unread]
