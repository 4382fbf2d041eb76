"""doctor/checks/command.py: the serve command's flags, its
--speculative-config, a forced attention backend and --max-model-len."""

from __future__ import annotations

import json
import shlex

import pytest
from support import known
from support import pairs as F
from support.doctor import FORCED, NO_ENV, PINS, check, find, published, reported, sev
from support.releases import (
    before,
    edge,
    first_where,
    having,
    last_where,
    newest,
    newest_patched,
    serving,
    v1_by_default,
    v1_gone,
    v2_by_default,
)
from vpatch.doctor import behaviour, hub, serve
from vpatch.doctor import checks as doctor
from vpatch.doctor.environment import Readiness, VllmEnv

V2_DEFAULT = last_where(v2_by_default)  # V1 still selectable (VLLM_USE_V2_MODEL_RUNNER=0)
V1_GONE = first_where(v1_gone)
NEWEST = newest()


def v1_crashes(r):
    """the V1 runner serves by default and crashes on a forced backend"""
    return "v1" in r.forced_backend_crash and "*" not in r.v2_default


def none_crashes(r):
    """the runner that serves by default takes a forced backend"""
    return not r.forced_backend_crash


def v2_crashes(r):
    """the V2 runner serves by default and crashes on a forced backend"""
    return "v2" in r.forced_backend_crash and "*" in r.v2_default


@pytest.mark.parametrize(
    "version,fmt,environ,broken",
    [
        (first_where(v1_crashes), "vllm", NO_ENV, True),
        (last_where(v1_crashes), "vllm", NO_ENV, True),
        (first_where(none_crashes), "vllm", NO_ENV, False),
        (last_where(none_crashes), "vllm", NO_ENV, False),
        (first_where(v2_crashes), "vllm", NO_ENV, True),
        (V2_DEFAULT, "vllm", NO_ENV, True),
        (V2_DEFAULT, "vllm", {"VLLM_USE_V2_MODEL_RUNNER": "0"}, False),
        (V2_DEFAULT, "mla", NO_ENV, False),  # an MLA drafter takes the MLA backend
        (V1_GONE, "vllm", NO_ENV, True),  # V2 the only runner: no V1 to escape to
        (V1_GONE, "vllm", {"VLLM_USE_V2_MODEL_RUNNER": "1"}, True),
    ],
)
def test_forced_attention_backend(tmp_path, version, fmt, environ, broken):
    r = check(tmp_path, version, fmt=fmt, command=FORCED, environ=environ)
    assert (sev(r, "attention_backend") == "error") == broken, r.to_text()
    assert ("--attention-backend" in r.serve) != broken  # the printed command drops it


@pytest.mark.parametrize(
    "flags",
    [["--attention-config.backend=FLASHMLA"], ["--attention-config", '{"backend": "FLASHMLA"}']],
)
def test_forced_attention_backend_flag_forms(tmp_path, flags):
    r = check(tmp_path, V2_DEFAULT, command=flags)
    assert (
        sev(r, "attention_backend") == "error"
        and "FLASHMLA" in r.serve.split("--spec")[0]
        or ("FLASHMLA" not in r.serve)
    )
    assert sev(r, "attention_backend") == "error"


def test_forced_attention_backend_from_the_environment(tmp_path):
    r = prefixed(tmp_path, "VLLM_ATTENTION_BACKEND=FLASHMLA", V2_DEFAULT, {})
    assert "VLLM_ATTENTION_BACKEND" in find(r, "attention_backend").message
    assert sev(r, "attention_backend") == "error" and "VLLM_ATTENTION_BACKEND" not in r.serve


SHORT = last_where(lambda r: r.draft_positions_short)  # the drafter keeps its own positions
assert SHORT in serving("draft_positions")  # ... and the series fixes it there


@pytest.mark.parametrize(
    "version,max_len,broken",
    [
        (SHORT, None, True),  # vLLM's default: the target's 262144 > the drafter's 131072
        (SHORT, "200k", True),
        (SHORT, "128K", False),  # 131072
        (SHORT, "131072", False),
        (newest_patched(), None, True),
        (first_where(lambda r: not r.draft_positions_short), None, False),  # positions cover it
        (NEWEST, "auto", False),
    ],
)
def test_max_model_len_above_the_drafters_positions(tmp_path, version, max_len, broken):
    """SpecForge's Kimi-K2.5 drafter has 131072 positions; Kimi-K2.5 262144."""
    r = check(tmp_path, version, fmt="specforge_kimi", max_len=max_len)
    assert (sev(r, "max_model_len") == "error") == broken, r.to_text()
    if broken:
        assert "--max-model-len 131072" in r.serve
        fixed = check(
            tmp_path / "p",
            version,
            fmt="specforge_kimi",
            patches=reported(version, "draft_positions", "applied"),
        )
        assert sev(fixed, "max_model_len") == "info"


# TorchSpec's Kimi MLA drafter (YaRN) trained for 131072 positions, Kimi-K2.5
# serving its 262144 (vLLM's default max_model_len)
SHORT_YARN = {"fmt": "torchspec_mla", "config": {"max_position_embeddings": 131072}}


def caps(r):
    """the V2 runner lowers max_model_len to a drafter's positions"""
    return "v2" in r.draft_caps_max_model_len


CAPS = first_where(lambda r: caps(r) and "v1" in r.runners)


@pytest.mark.parametrize(
    "version,environ,lowered",
    [
        (last_where(lambda r: not caps(r)), NO_ENV, False),  # no _limit_max_model_len_to_draft
        (CAPS, NO_ENV, True),  # V2 (the default) lowers it
        (CAPS, {"VLLM_USE_V2_MODEL_RUNNER": "0"}, False),  # V1 does not
        (V1_GONE, NO_ENV, True),  # the only runner
    ],
)
def test_a_drafter_that_does_not_share_positions_lowers_max_model_len(
    tmp_path, version, environ, lowered
):
    r = check(tmp_path, version, environ=environ, **SHORT_YARN)
    f = find(r, "max_model_len")
    assert ("lowers the served max_model_len to 131072" in f.message) == lowered, f.message
    assert (f.severity == "warning") == lowered
    if lowered:
        assert "--max-model-len 131072" in r.serve


def test_a_drafter_whose_rope_only_sizes_its_cache_keeps_max_model_len(tmp_path):
    """SpecForge's Kimi drafter: rope_scaling null, a cache-only RoPE type:
    vLLM raises its positions instead (where draft_positions_short is false)."""
    f = find(check(tmp_path, known(V1_GONE), fmt="specforge_kimi"), "max_model_len")
    assert f.severity == "info" and "builds the drafter's positions" in f.message


@pytest.mark.parametrize(
    "version,environ,words,severity",
    [
        (V2_DEFAULT, {"VLLM_USE_V2_MODEL_RUNNER": "0"}, [], "info"),  # selects V1
        (V1_GONE, {"VLLM_USE_V2_MODEL_RUNNER": "0"}, ["env", "-u"], "error"),
        (V1_GONE, {"VLLM_USE_V2_MODEL_RUNNER": "true"}, ["env", "-u"], "error"),
        (V1_GONE, {"VLLM_USE_V2_MODEL_RUNNER": "1"}, [], "info"),
        (V1_GONE, NO_ENV, [], "info"),
    ],
)
def test_the_v1_runner_variable_where_v1_is_gone(tmp_path, version, environ, words, severity):
    r = check(tmp_path, version, environ=environ, max_len="8192")
    f = find(r, "model_runner")
    assert f.severity == severity, f.message
    assert r.serve.startswith(" ".join([*words, "VLLM_USE_V2_MODEL_RUNNER"])) == bool(words)
    if severity == "error":
        assert "Model Runner V1 has been removed" in f.message


def test_the_v1_runner_variable_in_the_command_is_dropped(tmp_path):
    r = prefixed(tmp_path, "VLLM_USE_V2_MODEL_RUNNER=0", known(V1_GONE), None)
    assert sev(r, "model_runner") == "error" and "VLLM_USE_V2_MODEL_RUNNER" not in r.serve


def prefixed(tmp_path, assignment, version, environ):
    """The report for `ASSIGNMENT vllm serve TARGET` with an eagle3 drafter,
    on `version`, the server's environment `environ` (None: not read)."""
    t, d = F.pair(tmp_path)
    spec = {"method": "eagle3", "model": str(d), "num_speculative_tokens": 3}
    words = [assignment, "vllm", "serve", str(t), "--trust-remote-code"]
    s = serve.parse([*words, "--speculative-config", json.dumps(spec)])
    env = VllmEnv("python3", "vllm", version, "/x")
    return doctor.diagnose(
        hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, environ, pins=PINS
    )


def test_uninterpreted_flags_are_said_and_kept(tmp_path):
    r = check(
        tmp_path, NEWEST, command=["--gpu-memory-utilization", "0.9", "--enable-prefix-caching"]
    )
    f = find(r, "serve_flags")
    assert f.severity == "warning" and "--gpu-memory-utilization" in f.message
    assert "--gpu-memory-utilization 0.9 --enable-prefix-caching" in r.serve
    assert r.to_json()["uninterpreted"] == [
        "--gpu-memory-utilization",
        "--enable-prefix-caching",
    ]


def test_a_flag_given_twice_is_a_warning_naming_both(tmp_path):
    r = check(tmp_path, NEWEST, tp=2, command=["--tensor-parallel-size", "4"])
    f = find(r, "serve_flags")
    assert f.severity == "warning", r.to_text()
    assert "given twice, vLLM takes the last" in f.message
    assert "`-tp 2`, then `--tensor-parallel-size 4`" in f.message
    assert "--tensor-parallel-size 4" in r.serve and "-tp" not in r.serve


@pytest.mark.parametrize(
    "spec,broken,phrase",
    [
        ({"method": "eagle"}, True, "method 'eagle'"),
        ({"method": None}, False, "guesses"),
        ({"num_speculative_tokens": None}, True, "no num_speculative_tokens"),
        ({"num_speculative_tokens": 0}, True, ">= 1"),
        ({"draft_tensor_parallel_size": 4}, True, "only 1 or the target's"),
        ({"draft_tensor_parallel_size": 8}, False, "draft_tensor_parallel_size 8"),
    ],
)
def test_speculative_config(tmp_path, spec, broken, phrase):
    f, fixed = speculative_config(tmp_path, spec)
    assert (f.severity == "error") == broken and phrase in f.message
    assert fixed["method"] == "eagle3" and isinstance(fixed["num_speculative_tokens"], int)
    assert fixed.get("draft_tensor_parallel_size") in (None, 8)


@pytest.mark.parametrize("k,severity", [(16, "info"), (17, "warning"), (100_000_000, "warning")])
def test_many_draft_tokens_are_a_warning(tmp_path, k, severity):
    """--num-speculative-tokens 100000000 was said as "100000000 draft
    tokens per step", no warning."""
    f, fixed = speculative_config(tmp_path, {"num_speculative_tokens": k})
    assert f.severity == severity and f"eagle3, {k} draft tokens per step" in f.message
    if severity == "warning":
        assert "far more than an EAGLE-3 drafter proposes well" in f.message
    assert fixed["num_speculative_tokens"] == k  # kept as written


def speculative_config(tmp_path, spec):
    """The speculative_config finding for a serve command whose
    --speculative-config is eagle3 with `spec` over it, and the
    --speculative-config of the command doctor prints."""
    t, d = F.pair(tmp_path)
    full = {"method": "eagle3", "model": str(d), "num_speculative_tokens": 3, **spec}
    full = {k: v for k, v in full.items() if v is not None}
    s = serve.parse(
        [
            "vllm",
            "serve",
            str(t),
            "--trust-remote-code",
            "-tp",
            "8",
            "--speculative-config",
            json.dumps(full),
        ]
    )
    env = VllmEnv("python3", "vllm", NEWEST, "/x")
    r = doctor.diagnose(
        hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, {}, pins=PINS
    )
    fixed = json.loads(r.serve.split("--speculative-config ")[1].strip("'"))
    return find(r, "speculative_config"), fixed


# -- the speculative config's keys, the --spec-* flags and the flags people
# serve these targets with -----------------------------------------

# the release the recipes' names are checked on: B12X but no B12X_MLA_SPARSE,
# the sampling methods without a fork's "probabilistic"
NEWEST_FACTS = having(
    "0.34.0",
    attention_backends=lambda b: "B12X" in b and "B12X_MLA_SPARSE" not in b,
    rejection_sample_methods={"standard", "synthetic", "block", "fly"},
)

SPEC_FLAGS_BEFORE, SPEC_FLAGS = edge(lambda r: r.spec_flags)
K26 = "vllm serve moonshotai/Kimi-K2.6 --tensor-parallel-size 8 --trust-remote-code "
SPEC = {"model": F.KIMI_K26_DRAFTER, "method": "eagle3", "num_speculative_tokens": 3}


def k26(tmp_path, version, extra="", spec=None, **kw):
    """doctor on the Kimi-K2.6 recipe's command (lightseekorg's MLA drafter)
    with `extra` flags and the speculative config `spec`."""
    given = SPEC if spec is None else spec
    words = (
        K26 + extra + (f" --speculative-config {shlex.quote(json.dumps(given))}" if given else "")
    )
    kw.setdefault("target", "kimi_k26")
    return published(tmp_path, words, version, **kw)


SPEC_WORDS = f"--spec-method eagle3 --spec-model {F.KIMI_K26_DRAFTER} --spec-tokens 3"


@pytest.mark.parametrize(
    "version,ok", [(SPEC_FLAGS_BEFORE, False), (SPEC_FLAGS, True), (NEWEST, True)]
)
def test_spec_flags_are_read_as_the_release_reads_them(tmp_path, version, ok):
    """--spec-method/--spec-model/--spec-tokens: merged into the speculative
    config from the release that has them (engine/arg_utils.py), an
    unrecognized argument before it; either way the pair is judged."""
    r = k26(tmp_path, version, SPEC_WORDS, spec={})
    f = find(r, "speculative_keys")
    assert (f.severity == "info") == ok, r.to_text()
    assert sev(r, "speculative_config") == "info"  # eagle3, 3 tokens: read from the flags
    if ok:
        assert "--spec-method, --spec-model, --spec-tokens merged" in f.message
        assert "--spec-method eagle3" in r.serve and "--speculative-config" not in r.serve
    else:
        assert "refuses it at startup (unrecognized arguments" in f.message
        assert "--spec-" not in r.serve and '"num_speculative_tokens": 3' in r.serve


def test_a_spec_flag_and_the_same_key_in_the_json_are_mutually_exclusive(tmp_path):
    r = k26(tmp_path, SPEC_FLAGS, "--spec-tokens 4")
    f = find(r, "speculative_keys")
    assert f.severity == "error" and "are mutually exclusive" in f.message, r.to_text()
    assert "--spec-tokens" not in r.serve and '"num_speculative_tokens": 3' in r.serve


EXTRA_FORBIDDEN_BEFORE, EXTRA_FORBIDDEN = edge(lambda r: r.spec_extra == "forbid")


@pytest.mark.parametrize(
    "version,severity",
    [(EXTRA_FORBIDDEN_BEFORE, "warning"), (EXTRA_FORBIDDEN, "error"), (NEWEST, "error")],
)
def test_a_key_the_release_lacks_is_an_error_naming_the_nearest_field(tmp_path, version, severity):
    """A fork's draft_attention_backend, as public scripts copy it: every
    release from the one whose configs forbid extra fields stops at startup;
    before it the key is dropped without a word."""
    spec = {**SPEC, "draft_attention_backend": "TRITON_MLA"}
    r = k26(tmp_path, version, spec=spec)
    f = find(r, "speculative_keys")
    assert f.severity == severity, r.to_text()
    assert "'draft_attention_backend'" in f.message
    near = behaviour.nearest("draft_attention_backend", PINS.rules.at(version).spec_fields)
    assert f"'{near}'" in f.message
    assert "draft_attention_backend" not in r.serve


DASHED_BEFORE, DASHED = edge(lambda r: r.spec_dashed)


@pytest.mark.parametrize("version,severity", [(DASHED_BEFORE, "error"), (DASHED, "info")])
def test_dashed_keys_are_read_from_the_release_that_reads_them(tmp_path, version, severity):
    spec = {"model": F.KIMI_K26_DRAFTER, "method": "eagle3", "num-speculative-tokens": 3}
    r = k26(tmp_path, version, spec=spec)
    f = find(r, "speculative_keys")
    assert f.severity == severity, r.to_text()
    if severity == "error":  # written as the release reads it
        assert '"num_speculative_tokens": 3' in r.serve and "num-speculative" not in r.serve
        assert "write 'num_speculative_tokens'" in f.message
    else:  # read as num_speculative_tokens: kept as written
        assert '"num-speculative-tokens": 3' in r.serve
        assert sev(r, "speculative_config") == "info"


# The public Kimi-K2.6 command: --max-model-len 131072, the speculative
# config's "max_model_len": 8192, lightseekorg's YaRN MLA drafter
LOWERS = first_where(lambda r: bool(r.draft_caps_max_model_len))


@pytest.mark.parametrize(
    "version,environ,lowered",
    [
        (before(LOWERS), NO_ENV, False),
        (LOWERS, NO_ENV, True),
        (LOWERS, {"VLLM_USE_V2_MODEL_RUNNER": "0"}, False),  # the V1 runner does not
        (NEWEST, NO_ENV, True),
    ],
)
def test_a_speculative_max_model_len_below_the_served_one(tmp_path, version, environ, lowered):
    r = published(tmp_path, F.KIMI_K26_COMMAND, version, environ=environ)
    f = find(r, "max_model_len")
    said = "lowers the served max_model_len from 131072 to 8192"
    assert (said in f.message) == lowered, f.message
    assert '"max_model_len" 8192' in f.message and "131072" in f.message
    assert (f.severity == "warning") == lowered
    if lowered:
        assert "_limit_max_model_len_to_draft" in f.message
        assert "max_model_len" not in r.serve.split("--speculative-config")[1]
    else:
        assert "sets only the draft model config's max_model_len" in f.message


def test_a_speculative_max_model_len_above_the_served_one_is_refused(tmp_path):
    r = k26(tmp_path, NEWEST, "--max-model-len 4096", spec={**SPEC, "max_model_len": 8192})
    f = find(r, "max_model_len")
    assert f.severity == "error" and "cannot be larger than" in f.message, r.to_text()


def test_a_cache_only_rope_drafter_shares_the_targets_positions(tmp_path):
    """SpecForge's Kimi drafter (rope_scaling null): its positions are raised
    to the target's, so the speculative max_model_len lowers nothing."""
    r = k26(
        tmp_path,
        NEWEST,
        "--max-model-len 131072",
        spec={**SPEC, "max_model_len": 8192},
        fmt="specforge_kimi",
    )
    f = find(r, "max_model_len")
    assert f.severity == "info" and "sharing the target's positions" in f.message, f.message


def spec_backend_on(runner):
    """the runner builds the drafter with the speculative attention_backend"""
    return lambda r: f"{runner}:attention_backend" in r.spec_applied


V2_IGNORES = last_where(lambda r: "*" in r.v2_default and not spec_backend_on("v2")(r))
V2_HONOURS = first_where(lambda r: "*" in r.v2_default and spec_backend_on("v2")(r))
V1_HONOURS = last_where(lambda r: v1_by_default(r) and spec_backend_on("v1")(r))


@pytest.mark.parametrize(
    "version,fmt,severity,said",
    [
        (V1_HONOURS, "specforge_kimi", "info", "FLASH_ATTN builds the drafter"),
        (V2_IGNORES, "specforge_kimi", "error", "FLASH_ATTN is ignored"),  # target's reaches it
        (V2_IGNORES, "lightseekorg_mla", "warning", "FLASH_ATTN is ignored"),
        (V2_HONOURS, "specforge_kimi", "info", "FLASH_ATTN builds the drafter"),
        (NEWEST, "specforge_kimi", "info", "FLASH_ATTN builds the drafter"),
    ],
)
def test_the_speculative_attention_backend_is_named_in_the_attention_finding(
    tmp_path, version, fmt, severity, said
):
    r = k26(
        tmp_path,
        version,
        "--attention-backend FLASHMLA",
        spec={**SPEC, "attention_backend": "FLASH_ATTN"},
        fmt=fmt,
        target="kimi_k25",
    )
    f = find(r, "attention_backend")
    assert f.severity == severity and said in f.message, r.to_text()
    assert "FLASHMLA" in f.message


@pytest.mark.parametrize(
    "where,spec,extra",
    [
        ("speculative config", {**SPEC, "attention_backend": "B12X_MLA_SPARSE"}, ""),
        ("--attention-backend", SPEC, "--attention-backend B12X_MLA_SPARSE"),
    ],
)
def test_a_backend_name_the_release_lacks_is_refused(tmp_path, where, spec, extra):
    """vLLM's DeepSeek-V4-Flash recipe names B12X_MLA_SPARSE for DGX Spark;
    the release's AttentionBackendEnum has B12X only (research-54 E)."""
    version = NEWEST_FACTS
    r = k26(tmp_path, version, extra, spec=spec)
    f = find(r, "attention_backend")
    assert f.severity == "error", r.to_text()
    assert "Unknown attention backend: 'B12X_MLA_SPARSE'" in f.message and where in f.message
    assert "B12X_MLA_SPARSE" not in r.serve


@pytest.mark.parametrize(
    "value,severity",
    [("standard", "info"), ("block", "info"), ("synthetic", "warning"), ("fly", "warning")],
)
def test_rejection_sampling(tmp_path, value, severity):
    spec = {**SPEC, "rejection_sample_method": value}
    if value == "synthetic":
        spec["synthetic_acceptance_length"] = 2.5
    f = find(k26(tmp_path, NEWEST, spec=spec), "speculative_keys")
    assert f.severity == severity and f"rejection_sample_method '{value}'" in f.message
    assert ("not the target's" in f.message) == (severity == "warning")


def test_a_sampling_value_the_release_lacks_is_refused(tmp_path):
    """A fork's "rejection_sample_method": "probabilistic" (a public Kimi-K2.6
    deployment's); the release takes its own Literal values."""
    version = NEWEST_FACTS
    r = k26(tmp_path, version, spec={**SPEC, "rejection_sample_method": "probabilistic"})
    f = find(r, "speculative_keys")
    assert f.severity == "error" and "'probabilistic'" in f.message and "'block'" in f.message
    assert "rejection_sample_method" not in r.serve


@pytest.mark.parametrize(
    "version,severity", [(last_where(v1_by_default), "info"), (V1_GONE, "warning")]
)
def test_enforce_eager_in_the_speculative_config(tmp_path, version, severity):
    """Only the V1 runner reads speculative_config.enforce_eager."""
    f = find(k26(tmp_path, version, spec={**SPEC, "enforce_eager": True}), "speculative_keys")
    assert f.severity == severity and "enforce_eager True" in f.message, f.message


KV_DTYPE = first_where(lambda r: "kv_cache_dtype" in r.spec_fields)


@pytest.mark.parametrize(
    "version,extra,spec,said",
    [
        (NEWEST, "--kv-cache-dtype fp8", SPEC, "--kv-cache-dtype fp8: the drafter's cache is fp8"),
        (before(KV_DTYPE), "--kv-cache-dtype fp8", SPEC, "the drafter's cache is fp8"),
        (NEWEST, "--kv-cache-dtype fp8", {**SPEC, "kv_cache_dtype": "auto"}, "is auto"),
        (NEWEST, "", SPEC, "KV cache dtype auto"),
    ],
)
def test_the_drafters_kv_cache_dtype(tmp_path, version, extra, spec, said):
    r = k26(tmp_path, version, extra, spec=spec)
    f = find(r, "draft_kv_cache")
    assert f.severity == "info" and said in f.message, f.message
    assert "MLA latent KV" in f.message or "fp8" not in said


def test_data_parallel_builds_a_drafter_per_rank(tmp_path):
    r = published(tmp_path, F.KIMI_K26_DP, NEWEST)
    f = find(r, "tensor_parallel")
    assert "each of the 8 data-parallel ranks builds a drafter of its own" in f.message
    assert "load_eagle_model" in f.message and r.ok, r.to_text()


def test_flags_with_no_effect_on_eagle3_are_read_and_not_reported(tmp_path):
    """--language-model-only (config/multimodal.py: modality limits 0; the
    Kimi-K2.5 wrapper's language model still gives the aux states),
    --max-num-batched-tokens, --enable-expert-parallel (the drafter is
    dense): read, not in `uninterpreted`, no finding of their own."""
    extra = "--language-model-only --max-num-batched-tokens 4096 --enable-expert-parallel"
    r = k26(tmp_path, NEWEST, extra)
    assert r.to_json()["uninterpreted"] == [], r.to_text()
    for f in r.findings:
        if f.check != "serve_flags":
            assert "language" not in f.message and "batched" not in f.message, f.message
    assert extra in r.serve
