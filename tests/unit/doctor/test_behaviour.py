"""doctor/behaviour.py: the per-release table, mapping installed versions,
the PP split, the model runner, and how each release reads a drafter
config. (Each fact is re-read from the real releases in
tests/integration/doctor/test_releases_real.py.)"""

from __future__ import annotations

import pytest
from packaging.version import Version
from support import pairs as F
from support import releases
from support.releases import (
    edge,
    first_where,
    having,
    last_where,
    newest,
    newest_patched,
    oldest,
    v1_by_default,
    v2_by_default,
)
from vpatch import lock, rules
from vpatch.doctor import behaviour

PINS = lock.load()
KNOWN = behaviour.known_releases(PINS)
PATCHED = newest_patched()
NEWEST = newest()
V3 = "Eagle3DeepseekV3ForCausalLM"


def test_the_table_covers_the_pinned_releases():
    """Every pinned release from the first table to `newest`, each with every
    fact set (rules.toml; test_rules.py holds the file's shape)."""
    assert [v for v in PINS.versions() if PINS.rules.covers(v)] == KNOWN
    assert KNOWN[0] == PINS.rules.first and KNOWN[-1] == PINS.rules.newest
    for v in KNOWN:
        assert PINS.rules.at(v).release == v


def test_historical_facts():
    """Facts whose release is the point (each read from that release's
    source; the integration test re-reads them all): having() fails where
    rules.toml says otherwise."""

    def lacks_v3(archs):
        return V3 not in archs

    def has_v3(archs):
        return V3 in archs

    having("0.17.1", upstream_eagle3=False, archs=lacks_v3)
    having("0.18.0", upstream_eagle3=True, archs=has_v3)
    having("0.21.0", fc_width="three")
    having("0.24.0", fc_width="config")
    having("0.29.0", d2t_only_if_vocab_differs=False)
    having("0.30.0", d2t_only_if_vocab_differs=True)


# the last known release of its minor, and a later one of that minor no one pins
LAST_OF_A_MINOR = next(
    v
    for v, w in zip(KNOWN, KNOWN[1:], strict=False)
    if Version(v).release[:2] != Version(w).release[:2]
)
_MAJOR, _MINOR, _MICRO = Version(LAST_OF_A_MINOR).release
UNPINNED = f"{_MAJOR}.{_MINOR}.{_MICRO + 5}"


@pytest.mark.parametrize(
    "installed,release,exact",
    [
        (PATCHED, PATCHED, True),
        (f"{PATCHED}+cu129", PATCHED, True),
        (f"{NEWEST}.dev3", NEWEST, True),
        (UNPINNED, LAST_OF_A_MINOR, False),
    ],
)
def test_place(installed, release, exact):
    p = behaviour.place(installed, KNOWN)
    assert (p.release, p.exact) == (release, exact)


def test_place_maps_a_newer_release_to_the_newest_and_newer_says_so():
    """place() alone maps anything above to the newest known; doctor asks
    newer() first and refuses (NewerRelease, exit 12) rather than guess."""
    p = behaviour.place("99.0.0", KNOWN)
    assert (p.release, p.exact) == (KNOWN[-1], False)
    err = behaviour.newer(PINS, "99.0.0+cu130")
    assert err is not None and err.exit_code == 12 and "vpatch carry 99.0.0" in str(err)
    assert behaviour.newer(PINS, KNOWN[-1]) is None and behaviour.newer(PINS, "latest") is None


def test_place_too_old_or_garbage():
    assert behaviour.place("0.14.2", KNOWN) is None and behaviour.place("latest", KNOWN) is None


def test_pp_indices_as_vllm_splits():
    assert behaviour.pp_indices(61, 0, 2, env={}) == (0, 31)
    assert behaviour.pp_indices(61, 1, 2, env={}) == (31, 61)
    assert [behaviour.pp_indices(61, r, 4, env={}) for r in range(4)] == [
        (0, 15),
        (15, 30),
        (30, 46),
        (46, 61),
    ]
    assert behaviour.pp_indices(61, 1, 2, env={"VLLM_PP_LAYER_PARTITION": "40,21"}) == (40, 61)
    with pytest.raises(ValueError, match="does not split"):
        behaviour.pp_indices(61, 1, 2, env={"VLLM_PP_LAYER_PARTITION": "40,20"})


ENV = "VLLM_USE_V2_MODEL_RUNNER"
# the V2 runner the default for DeepseekV2ForCausalLM alone, then for every target
V2_FOR_V2 = first_where(lambda r: "DeepseekV2ForCausalLM" in r.v2_default)
V2_FOR_ALL = first_where(lambda r: "*" in r.v2_default)


@pytest.mark.parametrize(
    "release,arch,pp,env,want",
    [
        (PATCHED, "DeepseekV3ForCausalLM", 1, {}, "v1"),
        (V2_FOR_V2, "DeepseekV3ForCausalLM", 1, {}, "v1"),
        (V2_FOR_V2, "DeepseekV2ForCausalLM", 1, {}, "v2"),
        (V2_FOR_ALL, "KimiK25ForConditionalGeneration", 1, {}, "v2"),
        (V2_FOR_ALL, "DeepseekV3ForCausalLM", 2, {}, "v1"),  # no PP on the V2 runner yet
        (first_where(lambda r: r.v2_supports_pp), "DeepseekV3ForCausalLM", 2, {}, "v2"),
        (last_where(v2_by_default), "DeepseekV3ForCausalLM", 1, {ENV: "0"}, "v1"),
        (last_where(v1_by_default), "DeepseekV3ForCausalLM", 1, {ENV: "1"}, "v2"),
    ],
)
def test_runner(release, arch, pp, env, want):
    assert behaviour.runner(PINS.rules.at(release), arch, pp, env=env) == want


def test_default_ids():
    assert behaviour.default_ids(61) == (2, 30, 58) and behaviour.default_ids(8) == (2, 4, 5)


def spec() -> dict:
    return F.drafter_for("kimi_k25", "speculators")[0]


def test_speculators_conversion():
    e = behaviour.effective(spec(), "speculators", PINS.rules.at(PATCHED))
    assert e.arch == "Eagle3LlamaForCausalLM" and not e.problems
    assert e.cfg["norm_before_residual"] is True and "target_hidden_size" not in e.cfg
    assert e.cfg["draft_vocab_size"] == 32000 and e.cfg["vocab_size"] == 163840
    assert e.cfg["eagle_aux_hidden_state_layer_ids"] == [2, 30, 58]
    raw = {**spec(), "norm_before_residual": False, "target_hidden_size": 7168}
    e = behaviour.effective(raw, "speculators", PINS.rules.at(NEWEST))
    assert e.cfg["norm_before_residual"] is False and e.cfg["target_hidden_size"] == 7168


def test_speculators_architecture_by_model_type():
    by_name, by_type = (PINS.rules.at(v) for v in edge(lambda r: r.speculators_arch_by_type))
    raw = spec()
    raw["transformer_layer_config"]["model_type"] = "qwen3"
    assert behaviour.effective(raw, "speculators", by_type).arch == "Eagle3Qwen3ForCausalLM"
    assert behaviour.effective(raw, "speculators", by_name).arch == "Eagle3LlamaForCausalLM"
    raw["transformer_layer_config"]["model_type"] = "deepseek_v3"
    e = behaviour.effective(raw, "speculators", by_type)
    assert e.arch is None and "Unsupported model_type deepseek_v3" in e.problems[0]


def test_speculators_keys_an_old_release_drops():
    raw = {**spec(), "fc_norm": True, "norm_before_fc": True}
    none, one = (PINS.rules.at(v) for v in edge(lambda r: "norm_before_fc" in r.speculators_copies))
    both = PINS.rules.at(first_where(lambda r: "fc_norm" in r.speculators_copies))
    assert behaviour.effective(raw, "speculators", none).ignored == ("norm_before_fc", "fc_norm")
    assert behaviour.effective(raw, "speculators", one).ignored == ("fc_norm",)
    assert behaviour.effective(raw, "speculators", both).ignored == ()


def test_vllm_format_renaming():
    raw = F.llama_drafter(163840)
    for arch, want in [
        ("LlamaForCausalLM", "Eagle3LlamaForCausalLM"),
        ("LlamaForCausalLMEagle3", "LlamaForCausalLMEagle3"),
        ("Eagle3LlamaForCausalLM", "Eagle3LlamaForCausalLM"),
    ]:
        e = behaviour.effective({**raw, "architectures": [arch]}, "vllm", PINS.rules.at(oldest()))
        assert e.arch == want and e.architectures == (want,)
    e = behaviour.effective(
        {**raw, "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v2"},
        "vllm",
        PINS.rules.at(first_where(lambda r: V3 in r.archs)),
    )
    assert e.arch == "Eagle3DeepseekV3ForCausalLM" and e.mla


GLM = edge(lambda r: "glm_moe_dsa" in r.mtp_rewrite)


@pytest.mark.parametrize(
    "model_type,release,rewritten",
    [
        ("deepseek_v3", oldest(), True),
        ("glm_moe_dsa", GLM[0], False),
        ("glm_moe_dsa", GLM[1], True),
    ],
)
def test_mtp_rewrite(model_type, release, rewritten):
    raw = {**F.mla_drafter(163840), "model_type": model_type}
    e = behaviour.effective(raw, "vllm", PINS.rules.at(release))
    assert bool(e.problems) == rewritten
    if rewritten:
        assert e.architectures == ("Eagle3DeepSeekMTPModel",) and e.arch is None


# -- the speculative config and the MLA drafters' readers ---------------------------


def test_the_model_types_transformers_lacks_are_those_vllm_may_register():
    assert set().union(*behaviour.TRANSFORMERS_LACKS.values()) <= set(rules.CONFIG_TYPES)


NO_KIMI_K2 = releases.having("0.17.1", own_configs={"deepseek_v32", "kimi_k25"}, transformers=(4,))


def test_a_config_class_is_missing_only_where_vllm_and_every_transformers_lack_it():
    p = lock.load().rules
    without = p.at(NO_KIMI_K2)
    assert behaviour.config_class_missing("kimi_k2", without)
    assert not behaviour.config_class_missing("kimi_k25", without)  # vLLM's own
    assert not behaviour.config_class_missing("llama", without)
    later = p.at(releases.first_where(lambda r: "kimi_k2" in r.own_configs))
    assert not behaviour.config_class_missing("kimi_k2", later)


def test_the_speculative_config_as_a_release_reads_it():
    r = lock.load().rules.at(releases.newest())
    got = behaviour.speculative(
        {"model": "d", "num-speculative-tokens": 3, "draft_attention_backend": "X"},
        (("--spec-method", "method", "eagle3"),),
        r,
    )
    assert got.config["num_speculative_tokens"] == 3 and got.config["method"] == "eagle3"
    assert got.merged == ("--spec-method",) and len(got.refused) == 1
    assert "'draft_attention_backend'" in got.refused[0] and "'attention_backend'" in got.refused[0]


def test_the_connectors_of_a_kv_transfer_config():
    multi = {
        "kv_connector": "MultiConnector",
        "kv_connector_extra_config": {
            "connectors": [{"kv_connector": "NixlConnector"}, {"kv_connector": "Lmcache"}, 3]
        },
    }
    assert behaviour.kv_connectors(multi) == ["MultiConnector", "NixlConnector", "Lmcache"]
    assert behaviour.kv_connectors({}) == []
