"""doctor/checks/drafter.py: how each release builds the drafter (format,
class, MLA detection, norms, rope), one test per broken variant and
release where vLLM's behaviour differs."""

from __future__ import annotations

import pytest
from support import known
from support import pairs as F
from support.doctor import check, errors, find, reported, sev, span
from support.releases import edge, first_where, last_where, newest, serving, v1_by_default

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
    vocab, no d2t: vLLM does not take it for MLA."""
    r = check(tmp_path, version, target="kimi_k25", fmt="torchspec_mla")
    assert errors(r) == {"mla_detection"}, r.to_text()
    assert sev(r, "d2t") == "info" and sev(r, "rope") == "info"
    r = check(
        tmp_path / "p",
        version,
        target="kimi_k25",
        fmt="torchspec_mla",
        patches=reported(version, "kimi_k2_mla", "applied"),
    )
    assert r.ok, r.to_text()


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
