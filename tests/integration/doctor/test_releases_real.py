"""doctor's per-release facts (src/vpatch/data/rules.toml) re-read from every
pinned release's own source (its sdist, or the wheel's Python files where
vLLM published wheels only, from the cache): the table must say what the code does, release
by release. Each fact is read by its probe (vpatch/releasefacts/facts.py, which a
carry runs on a new release); the tests below check what doctor takes as the
same in every release, and that each release, carried from the pinned one
before it, would have had every fact read (no anchor its probes need gone)."""

from __future__ import annotations

import functools

import pytest
from support.releases import having
from vpatch import lock, probes
from vpatch.doctor import behaviour
from vpatch.releasefacts import facts, modelcode
from vpatch.sources import files

pytestmark = pytest.mark.integration

PINS = lock.load()
KNOWN = behaviour.known_releases(PINS)


@functools.cache
def source(v: str) -> dict[str, str]:
    globs = facts.globs()
    return probes.folder_files(files.release_files(PINS.get(v), globs), globs)


@pytest.fixture(scope="module", params=KNOWN)
def src(request):
    return request.param, source(request.param)


def test_rules_agree_with_their_probes(src):
    """Every fact of rules.toml is what the release's source says (bites:
    the table that sets d2t_only_if_vocab_differs, without it, fails from
    its release on)."""
    v, got = src
    assert facts.differences(facts.read(got).values, PINS.rules.at(v)) == {}


def test_what_doctor_takes_as_the_same_holds(src):
    """Every fact doctor writes once for all releases (facts.SAME) holds
    (bites: "num_layers - 3" read as "num_layers - 2" fails every release
    from the first with EAGLE-3 upstream)."""
    _, got = src
    assert facts.broken(got) == []


@pytest.mark.parametrize(("before", "after"), list(zip(KNOWN, KNOWN[1:], strict=False)))
def test_each_release_carried_from_the_one_before_reads_every_fact(before, after):
    """No probe asks for code the release before had and this one lacks:
    carried from it, no fact of it is unreadable (bites: the V1 runner's
    gate taken off, the carry to the release without the V1 runner names
    v1_reads_nested_ids, v2_default, v2_supports_pp and forced_backend_crash)."""
    assert facts.unreadable(facts.read(source(before)), facts.read(source(after))) == {}


def test_the_probes_before_their_gates_cannot_read_what_the_v1_removal_removed():
    """The release that removed the V1 model runner (its own fact, checked
    against rules.toml by having()); the probes as they were before (no
    gate) misread four facts there. Read against the anchors of the release
    before, they name exactly those four, and v2_env, as unreadable, each
    with the V1 code that went (the issue's finding, on the real sources);
    and spec_applied, a probe written after the gates, which asks the V1
    proposer through the same gate (ungated, it reads the V1 code gone)."""
    gone = facts.unreadable(
        facts.read(source(having("0.33.0", runners={"v1", "v2"})), gated=False),
        facts.read(source(having("0.34.0", runners={"v2"}, v2_env="must_be_1")), gated=False),
    )
    assert set(gone) == {
        "v1_reads_nested_ids",
        "v2_default",
        "v2_supports_pp",
        "forced_backend_crash",
        "v2_env",
        "spec_applied",
    }
    named = {str(a) for anchors in gone.values() for a in anchors}
    assert "vllm/config/vllm.py VllmConfig.use_v2_model_runner" in named
    assert "vllm/v1/worker/gpu_model_runner.py" in named


# -- serving.toml: which code serves a target, and what it does ------------------------


@functools.cache
def serving_source(v: str) -> dict[str, str]:
    globs = modelcode.globs(PINS.serving)
    return probes.folder_files(files.release_files(PINS.get(v), globs), globs)


@pytest.mark.parametrize("v", KNOWN)
def test_serving_agrees_with_its_probes(v):
    """Every route, serving-file fact and release fact of serving.toml is
    what the release's source says (bites: V3.2's nvidia file's id_n set
    true in serving.toml fails every release from its first table; the
    route of DeepseekV32ForCausalLM to its own package moved a release later fails
    there)."""
    got = modelcode.read(serving_source(v), PINS.serving).values
    assert modelcode.differences(got, PINS.serving.expected(v)) == {}


@pytest.mark.parametrize("v", KNOWN)
def test_what_doctor_takes_as_the_same_for_the_serving_files_holds(v):
    """No serving file overrides the default ids, and the interface's are
    (2, n // 2, n - 3) (modelcode.SAME)."""
    assert modelcode.broken(serving_source(v), PINS.serving) == []


@pytest.mark.parametrize(("before", "after"), list(zip(KNOWN, KNOWN[1:], strict=False)))
def test_each_release_carried_reads_every_serving_fact(before, after):
    """No serving probe asks for code the release before had and this one
    lacks (a route's dispatch or a capture class gone would show here)."""
    t = PINS.serving
    gone = facts.unreadable(
        modelcode.read(serving_source(before), t), modelcode.read(serving_source(after), t)
    )
    assert gone == {}
