"""doctor/checks/command.py: the serve command's flags, its
--speculative-config, a forced attention backend and --max-model-len."""

from __future__ import annotations

import json

import pytest
from support import known
from support import pairs as F
from support.doctor import FORCED, NO_ENV, PINS, check, find, reported, sev
from support.releases import (
    first_where,
    last_where,
    newest,
    newest_patched,
    serving,
    v1_gone,
    v2_by_default,
)
from vpatch.doctor import checks as doctor
from vpatch.doctor import hub, serve
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
