"""doctor/checks/drafter.py: how each release builds the drafter (format,
class, MLA detection, norms, rope), one test per broken variant and
release where vLLM's behaviour differs."""

from __future__ import annotations

import json
import shlex

import pytest
from support import known
from support import pairs as F
from support.doctor import PINS, check, errors, find, published, reported, sev, span
from support.releases import (
    edge,
    first_where,
    having,
    last_where,
    newest,
    serving,
    v1_by_default,
)
from vpatch.env import readiness

NEWEST = newest()
MLA_BEFORE, MLA_SINCE = edge(lambda r: "Eagle3DeepseekV2ForCausalLM" in r.archs)
NBF = edge(lambda r: r.norm_before_fc)
FCN = edge(lambda r: r.fc_norm)


def test_mla_drafter_needs_its_class_upstream(tmp_path):
    r = check(tmp_path / "a", known(MLA_BEFORE), target="kimi_k2", fmt="mla")
    assert sev(r, "architecture") == "error"
    r = check(tmp_path / "b", known(MLA_SINCE), target="kimi_k2", fmt="mla")
    assert r.ok and "Eagle3DeepseekV2ForCausalLM" in find(r, "architecture").message


def test_drafter_declaring_deepseek_v3_becomes_an_mtp_head(tmp_path):
    r = check(tmp_path, NEWEST, fmt="mla", config={"model_type": "deepseek_v3"})
    assert {"drafter_format", "architecture"} <= errors(r)
    assert "deepseek_v2" in find(r, "drafter_format").message


def test_unknown_drafter_class(tmp_path):
    r = check(tmp_path, config={"architectures": ["MistralForCausalLMEagle3"]})
    assert errors(r) == {"architecture"}
    assert "LlamaForCausalLMEagle3" in find(r, "architecture").message


def test_norm_before_residual_defaults(tmp_path):
    assert (
        "false (absent: vLLM-format default false)" in find(check(tmp_path / "a"), "norms").message
    )
    r = check(tmp_path / "b", fmt="speculators")
    assert "true (absent: speculators default true)" in find(r, "norms").message


@pytest.mark.parametrize(
    "key,version,ok",
    [
        ("norm_before_fc", NBF[0], False),
        ("norm_before_fc", NBF[1], True),
        ("fc_norm", FCN[0], False),
        ("fc_norm", FCN[1], True),
    ],
)
def test_norms_an_old_release_ignores(tmp_path, key, version, ok):
    r = check(tmp_path, version, config={key: True})
    assert r.ok == ok and (ok or "ignores" in find(r, "norms").message)


BY_TYPE_BEFORE, BY_TYPE = edge(lambda r: r.speculators_arch_by_type)
COPIES = edge(lambda r: "norm_before_fc" in r.speculators_copies)


@pytest.mark.parametrize(
    "version,ok",
    [
        (COPIES[0], False),
        (COPIES[1], True),
        (BY_TYPE, True),
    ],
)
def test_speculators_norm_before_fc_copied_where_the_release_copies_it(tmp_path, version, ok):
    r = check(tmp_path, version, fmt="speculators", config={"norm_before_fc": True})
    assert r.ok == ok, r.to_text()


def test_speculators_mla_layer_refused_where_the_arch_goes_by_type(tmp_path):
    layer = {**F.LLAMA_LAYER, "model_type": "deepseek_v3", "vocab_size": F.KIMI_VOCAB}
    config = {"transformer_layer_config": layer}
    r = check(tmp_path / "a", known(BY_TYPE), fmt="speculators", config=config)
    assert (
        "drafter_format" in errors(r)
        and "Unsupported model_type" in find(r, "drafter_format").message
    )
    r = check(tmp_path / "b", known(BY_TYPE_BEFORE), fmt="speculators", config=config)
    assert "Eagle3LlamaForCausalLM" in find(r, "architecture").message


def test_speculators_structure_validated_where_the_release_validates_it(tmp_path):
    spec = {"proposal_methods": [], "verifier": {}}
    config = {"speculators_config": spec}
    validated, unchecked = edge(lambda r: not r.speculators_validated)
    r = check(tmp_path / "a", known(validated), fmt="speculators", config=config)
    assert (
        "drafter_format" in errors(r) and "Invalid speculators" in find(r, "drafter_format").message
    )
    assert check(tmp_path / "b", known(unchecked), fmt="speculators", config=config).ok


def test_speculators_type_with_a_model_type_is_not_speculators(tmp_path):
    r = check(tmp_path, fmt="speculators", config={"model_type": "llama"})
    assert (
        "drafter_format" in errors(r)
        and "ignores the speculators" in find(r, "drafter_format").message
    )


ROPE_FIRST, ROPE_LAST, ROPE_FIXED = span("mla_rope_theta")


@pytest.mark.parametrize(
    "version,rope,broken",
    [
        (ROPE_FIRST, None, True),
        (ROPE_LAST, None, True),
        (ROPE_FIXED, None, False),
        (ROPE_LAST, "yarn", False),
    ],
)
def test_mla_drafter_without_rope_scaling(tmp_path, version, rope, broken):
    cfg = {"rope_scaling": None} if rope is None else {}
    r = check(tmp_path, version, target="kimi_k2", fmt="mla", config=cfg)
    assert (sev(r, "rope") == "error") == broken, r.to_text()
    if broken:
        assert "rope_theta (50000)" in find(r, "rope").message
        r = check(
            tmp_path / "p",
            version,
            target="kimi_k2",
            fmt="mla",
            config=cfg,
            patches=reported(version, "mla_rope_theta", "applied"),
        )
        assert sev(r, "rope") == "info"


# the Llama drafter reads fc_norm; the MLA drafter ignores it (the series fixes it)
MLA_IGNORES = serving("mla_fc_norm")


@pytest.mark.parametrize(
    "version,fmt,broken",
    [
        (MLA_IGNORES[0], "mla", True),
        (MLA_IGNORES[-1], "mla", True),
        (first_where(lambda r: r.mla_fc_norm), "mla", False),
        (FCN[1], "vllm", False),  # the Llama drafter reads fc_norm from here
        (FCN[0], "vllm", True),  # ... and ignores it before
    ],
)
def test_fc_norm(tmp_path, version, fmt, broken):
    r = check(tmp_path, version, target="kimi_k2", fmt=fmt, config={"fc_norm": True})
    assert (sev(r, "norms") == "error") == broken, r.to_text()
    if broken and fmt == "mla":
        r = check(
            tmp_path / "p",
            version,
            target="kimi_k2",
            fmt=fmt,
            config={"fc_norm": True},
            patches=reported(version, "mla_fc_norm", "applied"),
        )
        assert sev(r, "norms") == "info"


KIMI_NOT_MLA = first_where(lambda r: r.kimi_k2_drafter_not_mla)


@pytest.mark.parametrize("version", [KIMI_NOT_MLA, last_where(v1_by_default), NEWEST])
def test_torchspec_kimi_mla_drafter(tmp_path, version):
    """TorchSpec's Kimi MLA drafter: model_type kimi_k2, YaRN, draft vocab =
    vocab, no d2t: vLLM's draft config says it is not MLA, which nothing of
    a plain serve reads (a warning naming what does); the series' fix makes
    it MLA to the config too."""
    r = check(tmp_path, version, target="kimi_k25", fmt="torchspec_mla")
    assert r.ok and sev(r, "mla_detection") == "warning", r.to_text()
    assert "use_mla=False" in find(r, "mla_detection").message
    assert sev(r, "d2t") == "info" and sev(r, "rope") == "info"
    r = check(
        tmp_path / "p",
        version,
        target="kimi_k25",
        fmt="torchspec_mla",
        patches=reported(version, "kimi_k2_mla", "applied"),
    )
    assert r.ok and sev(r, "mla_detection") == "info", r.to_text()
    assert "fixed here" in find(r, "mla_detection").message


# The releases the MLA drafters' verdicts are settled on, each with what reads a
# draft's use_mla there (rules.toml's draft_mla_readers/_connectors, read
# from its source by releasefacts/speculative.py): nothing, then NIXL.
NONE_READS = having("0.26.0", kimi_k2_drafter_not_mla=True, draft_mla_readers=set())


def nixl(c):
    return "NixlConnector" in c


NIXL_READS = (
    having("0.33.0", kimi_k2_drafter_not_mla=True, draft_mla_connectors=nixl),
    having("0.34.0", kimi_k2_drafter_not_mla=True, draft_mla_connectors=nixl),
)
MLA_KIMI = sorted(F.kimi_mla_drafters())  # lightseekorg, ModelOpt, EAGLE 3.1, truncated vocab


@pytest.mark.parametrize("fmt", MLA_KIMI)
@pytest.mark.parametrize("version", [NONE_READS, *NIXL_READS])
def test_the_published_mla_kimi_drafters_on_a_plain_serve_warn(tmp_path, version, fmt):
    """The Kimi MLA drafters as published, served as vLLM's Kimi-K2.6 recipe
    serves lightseekorg's (TP 8, --trust-remote-code): ok, and a warning
    naming what of the release reads a draft's use_mla (nothing, where
    nothing does), none of it used. ModelOpt's drafter writes its ids only
    in eagle_config in its own convention (the output of layer k: [1, 29, 57]
    is vLLM's [2, 30, 58]); NONE_READS serves Kimi-K2.6 on its V1 runner,
    which feeds those ids as written: every state one layer early, an error
    of trained_layers that is not about MLA
    (modelopt/torch/speculative/plugins/transformers.py hooks each layer's
    output)."""
    r = published(tmp_path, RECIPE_K26, version, fmt=fmt, target="kimi_k26")
    shifted = fmt == "modelopt_mla" and version == NONE_READS
    assert errors(r) == ({"trained_layers"} if shifted else set()), r.to_text()
    f = find(r, "mla_detection")
    assert f.severity == "warning" and "use_mla=False" in f.message
    if version == NONE_READS:
        assert f"nothing in vLLM {version} reads a draft's use_mla" in f.message
    else:
        assert "NixlConnector" in f.message and "this command uses none" in f.message


RECIPE_K26 = (
    "vllm serve moonshotai/Kimi-K2.6 --tensor-parallel-size 8 --trust-remote-code "
    """--speculative-config '{"model":"lightseekorg/kimi-k2.6-eagle3-mla","method":"eagle3","""
    """"num_speculative_tokens":3}'"""
)


def kv(connector: dict) -> str:
    return RECIPE_K26 + " --kv-transfer-config " + shlex.quote(json.dumps(connector))


NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


@pytest.mark.parametrize(
    "version,connector,reads",
    [
        (NONE_READS, NIXL, False),  # nothing there reads it
        (NIXL_READS[0], NIXL, True),
        (NIXL_READS[1], NIXL, True),
        (NIXL_READS[1], {"kv_connector": "NixlPushConnector", "kv_role": "kv_both"}, True),
        (
            NIXL_READS[1],
            {
                "kv_connector": "MultiConnector",
                "kv_role": "kv_both",
                "kv_connector_extra_config": {
                    "connectors": [{"kv_connector": "OffloadingConnector"}, NIXL]
                },
            },
            True,
        ),
        # the Kimi-K2.6 recipe's offload connector reads the target's use_mla only
        (NIXL_READS[1], {"kv_connector": "SimpleCPUOffloadConnector", "kv_role": "kv_both"}, False),
        (NIXL_READS[1], {"kv_connector": "MooncakeConnector", "kv_role": "kv_both"}, False),
    ],
)
def test_a_kv_connector_that_reads_the_drafts_use_mla_is_an_error(
    tmp_path, version, connector, reads
):
    r = published(tmp_path, kv(connector), version, target="kimi_k26")
    f = find(r, "mla_detection")
    assert f.severity == ("error" if reads else "warning"), r.to_text()
    if reads:
        assert "this command uses what reads it: --kv-transfer-config Nixl" in f.message
        assert "nixl/base_worker.py" in f.message
        fixed = published(
            tmp_path / "p",
            kv(connector),
            version,
            target="kimi_k26",
            patches=reported(version, "kimi_k2_mla", "applied"),
        )
        assert sev(fixed, "mla_detection") == "info"


def test_a_dflash_method_reads_the_drafts_use_mla_where_its_speculator_does(tmp_path):
    """Methods dflash and dspark read the draft's use_mla where a dflash
    speculator reads it (speculative_config stays the error that the method
    is no EAGLE-3)."""
    since = first_where(lambda r: any("dflash" in x for x in r.draft_mla_readers))
    spec = '"method":"eagle3"'
    r = published(tmp_path, RECIPE_K26.replace(spec, '"method":"dflash"'), since, target="kimi_k26")
    assert {"mla_detection", "speculative_config"} <= errors(r), r.to_text()
    assert "method dflash" in find(r, "mla_detection").message


# sgl-project/SpecForge configs/kimi-k2-eagle3.json declares kimi_k2 for a
# Llama drafter; the last release before vLLM's _CONFIG_REGISTRY has kimi_k2
# allows transformers 4 only, which has no class for it (research-54 D).
NO_KIMI_K2 = having("0.17.1", own_configs={"deepseek_v32", "kimi_k25"}, transformers=(4,))
KIMI_K2_CLASS = first_where(lambda r: "kimi_k2" in r.own_configs)


@pytest.mark.parametrize("patched", [False, True])
def test_a_drafter_whose_model_type_has_no_config_class_is_an_error(tmp_path, patched):
    # --patched: every patch of its series installed (what `--vllm R --patched` takes)
    patches = readiness.expected(PINS, NO_KIMI_K2, patched)
    r = check(tmp_path, NO_KIMI_K2, target="kimi_k2", fmt="specforge_kimi_k2", patches=patches)
    f = find(r, "drafter_format")
    assert f.severity == "error", r.to_text()
    assert "no config class for model_type 'kimi_k2'" in f.message
    assert f"vLLM has one from {KIMI_K2_CLASS}" in f.message
    assert "with or without --trust-remote-code" in f.message
    r = check(tmp_path / "b", KIMI_K2_CLASS, target="kimi_k2", fmt="specforge_kimi_k2")
    assert sev(r, "drafter_format") == "info", r.to_text()


@pytest.mark.parametrize("trust,severity", [(True, "info"), (False, "error")])
def test_a_drafter_config_class_of_its_own_needs_trust_remote_code(tmp_path, trust, severity):
    """With auto_map naming a class of the repo, vLLM loads it as remote code:
    with --trust-remote-code only."""
    auto = {"auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config"}}
    command = RECIPE_K26 if trust else RECIPE_K26.replace(" --trust-remote-code", "")
    r = published(
        tmp_path, command, NO_KIMI_K2, target="kimi_k2", fmt="specforge_kimi_k2", config=auto
    )
    f = find(r, "drafter_format")
    assert f.severity == severity, r.to_text()
    assert ("configuration_deepseek.DeepseekV3Config" in f.message) == (not trust)


KIMI_YARN_32 = {**F.YARN, "factor": 32.0}  # 4096 x 32 = 131072, as the drafters


@pytest.mark.parametrize(
    "version", [KIMI_NOT_MLA, *edge(lambda r: not r.draft_positions_short), NEWEST]
)
def test_yarn_drafter_shorter_than_max_model_len_warns(tmp_path, version):
    r = check(
        tmp_path,
        version,
        target="kimi_k25",
        fmt="torchspec_mla",
        config={"rope_scaling": KIMI_YARN_32},
    )
    f = find(r, "rope_range")
    assert f.severity == "warning", r.to_text()
    assert "range is 131072 positions (4096 x 32)" in f.message
    assert "max_model_len 262144" in f.message and "from position 131072 on" in f.message
    assert "--max-model-len 131072" in f.message and "--max-model-len" not in r.serve


@pytest.mark.parametrize(
    "max_len,rope,severity",
    [
        ("131072", KIMI_YARN_32, "info"),  # served within the range
        (None, F.YARN, "info"),  # 4096 x 64 covers Kimi-K2.5's 262144
        (None, None, "info"),  # no YaRN: max_model_len speaks
        (None, {"type": "yarn", "factor": 4.0}, "warning"),  # no original: not checkable
    ],
)
def test_yarn_range_within_max_model_len(tmp_path, max_len, rope, severity):
    r = check(
        tmp_path, NEWEST, target="kimi_k25", fmt="torchspec_mla", max_len=max_len,
        config={"rope_scaling": rope},
    )  # fmt: skip
    assert sev(r, "rope_range") == severity, r.to_text()
