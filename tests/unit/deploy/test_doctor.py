"""`vpatch doctor` on real-shaped pairs (tests/support/deploy.py: Kimi-K2.5,
Kimi-K2, DeepSeek-V3 targets; vLLM-format, speculators and MLA drafters with
header-only safetensors), one test per check and broken variant, per release
where vLLM's behaviour differs; then the command itself (JSON, exit codes,
one-line errors). The tier (tests/vllm/release/test_doctor_verdicts.py) shows
the same verdicts on real vLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import deploy as F
from support import env as fake_env
from vpatch.deploy import doctor, hub
from vpatch.errors import ConfigError

IDS_KEY = "eagle_aux_hidden_state_layer_ids"


def check(
    tmp: Path,
    version: str | None = "0.17.1",
    ready: bool | None = True,
    tp: int = 8,
    pp: int = 1,
    **kw,
) -> doctor.Report:
    t, d = F.pair(tmp, **kw)
    env = doctor.VllmEnv("python3", "vllm" if version else None, version, "/x" if version else None)
    opts = doctor.Options(tensor_parallel_size=tp, pipeline_parallel_size=pp)
    return doctor.diagnose(hub.resolve(str(t)), hub.resolve(str(d)), env, ready, opts)


def sev(report: doctor.Report, name: str) -> str:
    return find(report, name).severity


def find(report: doctor.Report, name: str) -> doctor.Finding:
    return next(f for f in report.findings if f.check == name)


def errors(report: doctor.Report) -> set[str]:
    return {f.check for f in report.findings if f.severity == "error"}


# -- correct pairs -------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.15.0", "0.17.1", "0.18.0", "0.24.0", "0.32.0", "0.33.0"])
@pytest.mark.parametrize(
    "target,fmt",
    [
        ("kimi_k25", "vllm"),
        ("kimi_k25", "speculators"),
        ("kimi_k2", "vllm"),
        ("deepseek_v3", "vllm"),
    ],
)
def test_correct_pair_is_ok_and_served_with_eagle3(tmp_path, target, fmt, version):
    r = check(tmp_path, version, target=target, fmt=fmt)
    assert r.ok, r.to_text()
    assert all(f.severity == "info" for f in r.findings), r.to_text()
    names = [f.check for f in r.findings]
    assert len(names) == len(set(names)) == len(doctor.CHECKS)  # one finding per check
    assert '"method": "eagle3"' in r.serve and "--tensor-parallel-size 8" in r.serve
    assert "--trust-remote-code" in r.serve and r.serve.startswith("vllm serve ")
    spec = json.loads(r.serve.split("--speculative-config ")[1].strip("'"))
    assert spec == {
        "method": "eagle3",
        "model": str(tmp_path / f"drafter-{fmt}"),
        "num_speculative_tokens": 3,
    }


def test_json_shape(tmp_path):
    r = check(tmp_path)
    data = json.loads(r.to_json())
    assert set(data) == {"ok", "findings", "serve"} and data["ok"] is True
    assert all(set(f) == {"check", "severity", "message"} for f in data["findings"])
    assert {f["severity"] for f in data["findings"]} <= {"error", "warning", "info"}


def test_mla_drafter_needs_0_18(tmp_path):
    assert (
        sev(check(tmp_path / "a", "0.17.1", target="kimi_k2", fmt="mla"), "architecture") == "error"
    )
    r = check(tmp_path / "b", "0.18.0", target="kimi_k2", fmt="mla")
    assert r.ok and "Eagle3DeepseekV2ForCausalLM" in find(r, "architecture").message


def test_drafter_declaring_deepseek_v3_becomes_an_mtp_head(tmp_path):
    r = check(tmp_path, "0.32.0", fmt="mla", config={"model_type": "deepseek_v3"})
    assert {"drafter_format", "architecture"} <= errors(r)
    assert "deepseek_v2" in find(r, "drafter_format").message


def test_unknown_drafter_class(tmp_path):
    r = check(tmp_path, config={"architectures": ["MistralForCausalLMEagle3"]})
    assert errors(r) == {"architecture"}
    assert "LlamaForCausalLMEagle3" in find(r, "architecture").message


# -- d2t -------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.15.1", "0.17.1", "0.25.0", "0.32.0"])
def test_no_d2t_is_an_error(tmp_path, version):
    r = check(tmp_path, version, drop=("d2t", "t2d"))
    assert errors(r) == {"d2t"}
    assert "zero offsets" in find(r, "d2t").message


def test_d2t_of_the_wrong_length(tmp_path):
    r = check(tmp_path, tensors={"d2t": ("I64", [F.DRAFT_VOCAB + 1])})
    assert errors(r) == {"d2t"} and "weight load" in find(r, "d2t").message


@pytest.mark.parametrize(
    "version,severity", [("0.17.1", "info"), ("0.29.0", "info"), ("0.30.0", "error")]
)
def test_d2t_with_equal_vocabularies(tmp_path, version, severity):
    r = check(
        tmp_path,
        version,
        config={"draft_vocab_size": F.KIMI_VOCAB},
        tensors={
            "lm_head.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN]),
            "d2t": ("I64", [F.KIMI_VOCAB]),
        },
    )
    assert sev(r, "d2t") == severity
    r = check(
        tmp_path / "nod2t",
        version,
        config={"draft_vocab_size": F.KIMI_VOCAB},
        drop=("d2t", "t2d"),
        tensors={"lm_head.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN])},
    )
    assert r.ok, r.to_text()


def test_draft_vocab_defaults_to_vocab(tmp_path):
    r = check(
        tmp_path,
        delete=("draft_vocab_size",),
        drop=("d2t",),
        tensors={"lm_head.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN])},
    )
    assert r.ok and "draft vocab 163840" in find(r, "vocab").message


# -- aux layer ids ---------------------------------------------------------------


@pytest.mark.parametrize("version,phrase", [("0.17.1", "ValueError"), ("0.32.0", "match no layer")])
def test_ids_out_of_range(tmp_path, version, phrase):
    r = check(tmp_path, version, config={IDS_KEY: [2, 30, 99]})
    assert "aux_layers" in errors(r) and phrase in find(r, "aux_layers").message


@pytest.mark.parametrize("version,ok", [("0.17.1", True), ("0.24.0", False), ("0.25.0", True)])
def test_final_norm_id(tmp_path, version, ok):
    r = check(tmp_path, version, config={IDS_KEY: [2, 30, 61]})
    assert r.ok == ok, r.to_text()
    if not ok:
        assert errors(r) == {"aux_layers"} and "0.25.0" in find(r, "aux_layers").message


@pytest.mark.parametrize(
    "version,ready,ok",
    [
        ("0.17.1", True, True),
        ("0.20.0", True, True),  # vpatch's layer-0 fix installed (0.18.0-0.33.0)
        ("0.20.0", False, False),
        ("0.32.0", True, True),
        ("0.32.0", False, False),
    ],
)
def test_layer_0(tmp_path, version, ready, ok):
    r = check(tmp_path, version, ready, config={IDS_KEY: [0, 30, 58]})
    assert r.ok == ok, r.to_text()
    if not ok:
        assert "TypeError" in find(r, "aux_layers").message


def test_ids_out_of_order_and_duplicates(tmp_path):
    r = check(tmp_path / "a", config={IDS_KEY: [58, 2, 30]})
    assert r.ok and sev(r, "aux_layers") == "warning"
    assert "layer order [2, 30, 58]" in find(r, "aux_layers").message
    r = check(tmp_path / "b", config={IDS_KEY: [2, 2, 30]})
    assert sev(r, "aux_layers") == "warning" and "fc" in errors(r)


def test_default_ids_when_none_given(tmp_path):
    r = check(tmp_path, delete=(IDS_KEY,))
    assert r.ok and "[2, 30, 58]" in find(r, "aux_layers").message
    assert "default" in find(r, "aux_layers").message


def test_use_aux_hidden_state_false(tmp_path):
    r = check(
        tmp_path, config={"eagle_config": {"use_aux_hidden_state": False}}, drop=("fc.weight",)
    )
    assert "no aux layers" in find(r, "aux_layers").message
    assert sev(r, "fc") == "info"


# -- nested ids --------------------------------------------------------------------


@pytest.mark.parametrize(
    "version,env,severity",
    [
        ("0.17.1", {}, "error"),  # ignored, fc fixed at 3: wrong layers
        ("0.21.0", {}, "error"),
        ("0.25.0", {}, "warning"),  # the V1 runner reads them
        ("0.32.0", {}, "error"),  # the V2 runner (default) ignores them
        ("0.32.0", {"VLLM_USE_V2_MODEL_RUNNER": "0"}, "warning"),
    ],
)
def test_ids_only_nested(tmp_path, monkeypatch, version, env, severity):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False) if not env else None
    r = check(tmp_path, version, delete=(IDS_KEY,), config={"eagle_config": {IDS_KEY: [1, 29, 57]}})
    assert sev(r, "nested_layer_ids") == severity, r.to_text()
    assert r.ok == (severity != "error")


def test_nested_ids_equal_to_the_default_work_by_coincidence(tmp_path):
    r = check(
        tmp_path, "0.32.0", delete=(IDS_KEY,), config={"eagle_config": {IDS_KEY: [2, 30, 58]}}
    )
    assert r.ok and sev(r, "nested_layer_ids") == "warning"


def test_nested_four_ids_size_the_fc_on_0_22(tmp_path):
    """0.22+ size fc by the nested ids while the V2 runner feeds 3 states."""
    r = check(
        tmp_path,
        "0.32.0",
        delete=(IDS_KEY,),
        config={"eagle_config": {IDS_KEY: [1, 15, 30, 57]}},
        tensors={"fc.weight": ("BF16", [F.HIDDEN, 4 * F.HIDDEN])},
    )
    assert {"nested_layer_ids", "fc"} <= errors(r)


def test_nested_and_top_level(tmp_path):
    r = check(tmp_path / "a", config={"eagle_config": {IDS_KEY: [2, 30, 58]}})
    assert sev(r, "nested_layer_ids") == "info"
    r = check(tmp_path / "b", config={"eagle_config": {IDS_KEY: [1, 29, 57]}})
    assert sev(r, "nested_layer_ids") == "warning" and r.ok


# -- fc and hidden sizes -------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.17.1", "0.32.0"])
def test_fc_for_four_states(tmp_path, version):
    r = check(
        tmp_path,
        version,
        config={IDS_KEY: [1, 15, 30, 57]},
        tensors={"fc.weight": ("BF16", [F.HIDDEN, 4 * F.HIDDEN])},
    )
    assert errors(r) == {"fc"} and "weight load" in find(r, "fc").message
    hint = "num_aux_hidden_states: 4" if version == "0.32.0" else "exactly 3 states"
    assert hint in find(r, "fc").message


@pytest.mark.parametrize("version,ok", [("0.17.1", False), ("0.22.0", True), ("0.32.0", True)])
def test_num_aux_hidden_states(tmp_path, version, ok):
    r = check(
        tmp_path,
        version,
        config={IDS_KEY: [1, 15, 30, 57], "num_aux_hidden_states": 4},
        tensors={"fc.weight": ("BF16", [F.HIDDEN, 4 * F.HIDDEN])},
    )
    assert r.ok == ok, r.to_text()


def test_fewer_states_than_fc_takes(tmp_path):
    r = check(tmp_path, config={IDS_KEY: [20, 40]})
    assert errors(r) == {"fc"} and "first request" in find(r, "fc").message


def test_no_fc_in_checkpoint(tmp_path):
    assert "fc" in errors(check(tmp_path, drop=("fc.weight",)))


def test_target_hidden_size_mismatch(tmp_path):
    r = check(
        tmp_path,
        config={"target_hidden_size": 4096},
        tensors={"fc.weight": ("BF16", [F.HIDDEN, 3 * 4096])},
    )
    assert errors(r) == {"hidden_size"} and "4096" in find(r, "hidden_size").message


def test_drafter_hidden_used_when_no_target_hidden_size(tmp_path):
    r = check(tmp_path, delete=("target_hidden_size",))
    assert r.ok and "hidden_size (no target_hidden_size)" in find(r, "hidden_size").message


def test_null_target_hidden_size(tmp_path):
    r = check(tmp_path / "a", config={"target_hidden_size": None})
    assert "hidden_size" in errors(r) and "null" in find(r, "hidden_size").message
    # the speculators converter skips a null (its configs write one)
    assert check(tmp_path / "b", fmt="speculators").ok


# -- vocabularies, lm_head, embeddings ---------------------------------------------------


def test_drafter_for_another_vocabulary(tmp_path):
    cfg, ten = F.drafter_for("deepseek_v3", "vllm")
    t = F.write_model(tmp_path / "kimi", F.kimi_k25())
    d = F.write_model(tmp_path / "ds-drafter", cfg, ten)
    env = doctor.VllmEnv("python3", "vllm", "0.17.1", "/x")
    r = doctor.diagnose(hub.resolve(str(t)), hub.resolve(str(d)), env, True, doctor.Options(8))
    assert "vocab" in errors(r) and "another tokenizer" in find(r, "vocab").message


def test_lm_head(tmp_path):
    assert "vocab" in errors(check(tmp_path / "a", drop=("lm_head.weight",)))
    r = check(tmp_path / "b", tensors={"lm_head.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN])})
    assert "vocab" in errors(r) and "weight load" in find(r, "vocab").message


def test_embed_tokens(tmp_path):
    r = check(tmp_path / "a", tensors={"embed_tokens.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN])})
    assert r.ok and "own embed_tokens" in find(r, "embed_tokens").message
    r = check(tmp_path / "b", tensors={"embed_tokens.weight": ("BF16", [F.KIMI_VOCAB, 4096])})
    assert errors(r) == {"embed_tokens"}
    r = check(
        tmp_path / "c",
        config={"hidden_size": 4096},
        tensors={
            "fc.weight": ("BF16", [4096, 3 * F.HIDDEN]),
            "lm_head.weight": ("BF16", [F.DRAFT_VOCAB, 4096]),
        },
    )
    assert errors(r) == {"embed_tokens"}, r.to_text()


# -- norms ----------------------------------------------------------------------------------


def test_norm_before_residual_defaults(tmp_path):
    assert (
        "false (absent: vLLM-format default false)" in find(check(tmp_path / "a"), "norms").message
    )
    r = check(tmp_path / "b", fmt="speculators")
    assert "true (absent: speculators default true)" in find(r, "norms").message


@pytest.mark.parametrize(
    "key,version,ok",
    [
        ("norm_before_fc", "0.17.1", False),
        ("norm_before_fc", "0.18.0", True),
        ("fc_norm", "0.21.0", False),
        ("fc_norm", "0.22.0", True),
    ],
)
def test_norms_an_old_release_ignores(tmp_path, key, version, ok):
    r = check(tmp_path, version, config={key: True})
    assert r.ok == ok and (ok or "ignores" in find(r, "norms").message)


@pytest.mark.parametrize("version,ok", [("0.18.0", False), ("0.19.0", True), ("0.24.0", True)])
def test_speculators_norm_before_fc_copied_from_0_19(tmp_path, version, ok):
    r = check(tmp_path, version, fmt="speculators", config={"norm_before_fc": True})
    assert r.ok == ok, r.to_text()


# -- speculators format ----------------------------------------------------------------------


def test_speculators_mla_layer_refused_from_0_24(tmp_path):
    layer = {**F.LLAMA_LAYER, "model_type": "deepseek_v3", "vocab_size": F.KIMI_VOCAB}
    r = check(
        tmp_path / "a", "0.24.0", fmt="speculators", config={"transformer_layer_config": layer}
    )
    assert (
        "drafter_format" in errors(r)
        and "Unsupported model_type" in find(r, "drafter_format").message
    )
    r = check(
        tmp_path / "b", "0.23.0", fmt="speculators", config={"transformer_layer_config": layer}
    )
    assert "Eagle3LlamaForCausalLM" in find(r, "architecture").message


def test_speculators_structure_validated_on_0_15(tmp_path):
    spec = {"proposal_methods": [], "verifier": {}}
    r = check(tmp_path / "a", "0.15.1", fmt="speculators", config={"speculators_config": spec})
    assert (
        "drafter_format" in errors(r) and "Invalid speculators" in find(r, "drafter_format").message
    )
    assert check(
        tmp_path / "b", "0.16.0", fmt="speculators", config={"speculators_config": spec}
    ).ok


def test_speculators_type_with_a_model_type_is_not_speculators(tmp_path):
    r = check(tmp_path, fmt="speculators", config={"model_type": "llama"})
    assert (
        "drafter_format" in errors(r)
        and "ignores the speculators" in find(r, "drafter_format").message
    )


# -- parallelism ------------------------------------------------------------------------------


def test_tensor_parallel(tmp_path):
    assert errors(check(tmp_path / "a", tp=7)) == {"tensor_parallel"}
    assert check(tmp_path / "b", tp=16).ok  # 8 KV heads replicated over 16 ranks
    r = check(tmp_path / "c", config={"num_key_value_heads": 3})
    assert errors(r) == {"tensor_parallel"} and "KV heads" in find(r, "tensor_parallel").message


ON_LAST_RANK = {IDS_KEY: [40, 50, 58]}
EMBED = {"embed_tokens.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN])}


@pytest.mark.parametrize(
    "version,config,ok",
    [
        ("0.17.1", {}, False),  # layer 2 is on rank 0: the series raises
        ("0.17.1", ON_LAST_RANK, True),
        ("0.25.0", {}, False),  # dropped: fc gets 2 states
        ("0.29.0", ON_LAST_RANK, True),  # PP runs on the V1 runner there
        ("0.32.0", ON_LAST_RANK, False),  # the V2 runner refuses any PP pair
    ],
)
def test_pipeline_parallel(tmp_path, monkeypatch, version, config, ok):
    monkeypatch.delenv("VLLM_PP_LAYER_PARTITION", raising=False)
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    r = check(tmp_path, version, tp=4, pp=2, config=config, tensors=EMBED)
    assert r.ok == ok, r.to_text()
    assert "--pipeline-parallel-size 2" in r.serve
    if not ok:
        assert errors(r) == {"pipeline_parallel"}
        assert "--tensor-parallel-size 8" in find(r, "pipeline_parallel").message


def test_pipeline_partition_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_PP_LAYER_PARTITION", "55,6")
    r = check(tmp_path, tp=4, pp=2, config=ON_LAST_RANK, tensors=EMBED)
    assert "pipeline_parallel" in errors(r) and "55..60" in find(r, "pipeline_parallel").message


def test_pipeline_parallel_without_drafter_embeddings(tmp_path, monkeypatch):
    monkeypatch.delenv("VLLM_PP_LAYER_PARTITION", raising=False)
    r = check(tmp_path, tp=4, pp=2, config=ON_LAST_RANK)
    assert errors(r) == {"embed_tokens"}


# -- weights -----------------------------------------------------------------------------------


def test_pickled_weights_are_not_read(tmp_path):
    t, d = F.pair(tmp_path)
    (d / "model.safetensors").unlink()
    (d / "pytorch_model.bin").write_bytes(b"\x80not read")
    env = doctor.VllmEnv("python3", "vllm", "0.17.1", "/x")
    r = doctor.diagnose(hub.resolve(str(t)), hub.resolve(str(d)), env, True, doctor.Options(8))
    assert r.ok and sev(r, "weights") == "warning" and sev(r, "d2t") == "warning"


def test_no_weights(tmp_path):
    t, d = F.pair(tmp_path)
    (d / "model.safetensors").unlink()
    env = doctor.VllmEnv("python3", "vllm", "0.17.1", "/x")
    r = doctor.diagnose(hub.resolve(str(t)), hub.resolve(str(d)), env, True, doctor.Options(8))
    assert "weights" in errors(r)


def test_headers_only_no_tensor_data(tmp_path):
    """The fixtures' safetensors hold no data: doctor reading any would fail."""
    _, d = F.pair(tmp_path)
    f = d / "model.safetensors"
    n = int.from_bytes(f.read_bytes()[:8], "little")
    assert f.stat().st_size == 8 + n
    assert check(tmp_path / "again").ok


# -- the environment and the target --------------------------------------------------------------


def test_no_vllm(tmp_path):
    r = check(tmp_path, None, None)
    assert errors(r) == {"vllm"} and "0.17.1" in find(r, "vllm").message


def test_unpatched_0_17_is_refused(tmp_path):
    r = check(tmp_path, "0.17.1", False)
    assert errors(r) == {"vllm"} and "vpatch install --python python3" in find(r, "vllm").message


def test_readiness_unknown(tmp_path):
    r = check(tmp_path, "0.32.0", None)
    assert r.ok and sev(r, "vllm") == "warning"


def test_too_old_and_unknown_releases(tmp_path):
    assert errors(check(tmp_path / "a", "0.14.1", False)) >= {"vllm"}
    r = check(tmp_path / "b", "0.34.2", None)
    assert sev(r, "vllm") == "warning" and "0.33.0" in find(r, "vllm").message
    assert "rules of 0.33.0" in r.to_text()
    r = check(tmp_path / "c", "0.17.1+cu129", True)
    assert r.ok and sev(r, "vllm") == "info"


def test_kimi_k25_without_placeholder(tmp_path):
    cfg = F.kimi_k25()
    del cfg["media_placeholder_token_id"]
    t = F.write_model(tmp_path / "t", cfg)
    _, d = F.pair(tmp_path)
    env = doctor.VllmEnv("python3", "vllm", "0.32.0", "/x")
    r = doctor.diagnose(hub.resolve(str(t)), hub.resolve(str(d)), env, True, doctor.Options(8))
    assert errors(r) == {"target"}


def test_other_targets_get_a_warning(tmp_path):
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": F.HIDDEN,
        "num_hidden_layers": 61,
        "vocab_size": F.KIMI_VOCAB,
        "num_attention_heads": 64,
    }
    t = F.write_model(tmp_path / "t", cfg)
    _, d = F.pair(tmp_path)
    env = doctor.VllmEnv("python3", "vllm", "0.32.0", "/x")
    r = doctor.diagnose(hub.resolve(str(t)), hub.resolve(str(d)), env, True, doctor.Options(8))
    assert r.ok and sev(r, "target") == "warning"
    assert "--trust-remote-code" not in r.serve


# -- the environment: find_vllm and readiness (vpatch check's) --------------------------------

fake, fake_release, fake_template = fake_env.fake, fake_env.fake_release, fake_env.fake_template


def test_find_vllm(fake):
    env = doctor.find_vllm(str(fake.py))
    assert (env.dist, env.version, Path(env.location)) == ("vllm", fake_env.RELEASE, fake.root)
    none = doctor.find_vllm(sys.executable)  # vpatch's own environment has no vLLM
    assert none.version is None and none.dist is None


def test_find_vllm_bad_python(tmp_path):
    with pytest.raises(ConfigError, match="no such interpreter"):
        doctor.find_vllm(str(tmp_path / "no-python"))
    with pytest.raises(ConfigError, match="not a Python 3.8\\+ interpreter"):
        doctor.find_vllm("false")


def test_ready_is_what_vpatch_check_says(fake, monkeypatch):
    monkeypatch.setenv("VPATCH_ROOT", str(fake.lock_path.parent))  # the fake release's lock
    env = doctor.find_vllm(str(fake.py))
    assert doctor.ready_by_check(env) is False  # the series is not installed
    assert fake.run("install").returncode == 0
    assert doctor.ready_by_check(env) is True
    assert doctor.ready_by_check(doctor.VllmEnv(sys.executable)) is None  # no vLLM


def test_run_takes_readiness_from_the_callable(tmp_path, upstream_env):
    t, d = F.pair(tmp_path)
    py, _ = upstream_env
    seen = []

    def ready(env):
        seen.append(env)
        return True

    r = doctor.run(str(t), str(d), py, doctor.Options(8), ready=ready)
    assert seen[0].version == "0.25.0" and seen[0].dist == "vllm"
    assert r.ok
    # EAGLE-3 is upstream on 0.25.0: without the layer-0 fix the pair still
    # runs (it asks for no layer 0), and doctor says what is missing
    r = doctor.run(str(t), str(d), py, doctor.Options(8), ready=lambda env: False)
    assert r.ok
    assert any(f.check == "vllm" and "layer-0 fix not installed" in f.message for f in r.findings)


# -- the command -----------------------------------------------------------------------------------


def vpatch(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "vpatch.cli", "doctor", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def upstream_env(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """(python, env) of an environment whose vLLM `vpatch check` calls ready:
    a fake vllm 0.25.0, and vpatch data (VPATCH_ROOT) where 0.25.0 has
    EAGLE-3 upstream and no series."""
    where = tmp_path_factory.mktemp("upstream-env")
    py = fake_env.build_env(where / "venv", version="0.25.0")
    root = where / "root"
    (root / "patches/0.17.1").mkdir(parents=True)
    (root / "patches/0.17.1/series").write_text("")
    (root / "patches/patches.toml").write_text("")
    (root / "VERSIONS.lock").write_text(
        '[releases."0.17.1"]\ntag = "v0.17.1"\ncommit = "a"\nstatus = "patched"\n'
        'series = "patches/0.17.1"\n\n'
        '[releases."0.25.0"]\ntag = "v0.25.0"\ncommit = "b"\nstatus = "upstream"\n'
    )
    return str(py), {"VPATCH_ROOT": str(root)}


def test_cli_ok_json_exit_0(tmp_path, upstream_env):
    t, d = F.pair(tmp_path)
    py, env = upstream_env
    r = vpatch(
        "--target",
        str(t),
        "--drafter",
        str(d),
        "--python",
        py,
        "--tensor-parallel-size",
        "8",
        "--format",
        "json",
        env=env,
    )
    assert r.returncode == 0, r.stderr + r.stdout
    data = json.loads(r.stdout)
    assert data["ok"] is True and '"method": "eagle3"' in data["serve"]


def test_cli_broken_pair_exit_1(tmp_path, upstream_env):
    t, d = F.pair(tmp_path, drop=("d2t",))
    py, env = upstream_env
    r = vpatch(
        "--target",
        str(t),
        "--drafter",
        str(d),
        "--python",
        py,
        "--tensor-parallel-size",
        "8",
        env=env,
    )
    assert r.returncode == 1
    assert "error    d2t" in r.stdout and "NOT ok: 1 errors" in r.stdout
    assert r.stdout.rstrip().splitlines()[-1].startswith("vllm serve ")


@pytest.mark.parametrize(
    "args,phrase",
    [
        (["--target", "/nonexistent/model", "--drafter", "x"], "no such folder"),
        (["--target", "owner/not-cached", "--drafter", "x"], "not in the local Hugging Face cache"),
        (["--tensor-parallel-size", "0"], "--tensor-parallel-size must be at least 1"),
        (["--python", "/nonexistent/python"], "/nonexistent/python: no such interpreter"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path, args, phrase):
    t, d = F.pair(tmp_path)
    base = {"--target": str(t), "--drafter": str(d), "--python": sys.executable}
    it = iter(args)
    base.update(dict(zip(it, it, strict=True)))
    flat = [x for kv in base.items() for x in kv]
    r = vpatch(*flat, env={"HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vpatch: error: ") and phrase in lines[0], lines


def test_cli_bad_config_json(tmp_path):
    t, d = F.pair(tmp_path)
    (d / "config.json").write_text("{not json")
    r = vpatch("--target", str(t), "--drafter", str(d), "--python", sys.executable)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not valid JSON" in r.stderr


def test_cli_hub_ids_from_the_local_cache(tmp_path, upstream_env):
    cache = tmp_path / "hf"
    t, d = F.pair(tmp_path / "src")
    for repo, src in (("moonshotai/Kimi-K2.5", t), ("acme/kimi-eagle3", d)):
        snap = cache / f"models--{repo.replace('/', '--')}" / "snapshots" / "abc123"
        snap.parent.mkdir(parents=True)
        src.rename(snap)
        (snap.parents[1] / "refs").mkdir()
        (snap.parents[1] / "refs" / "main").write_text("abc123")
    py, env = upstream_env
    r = vpatch(
        "--target",
        "moonshotai/Kimi-K2.5",
        "--drafter",
        "acme/kimi-eagle3",
        "--python",
        py,
        "--tensor-parallel-size",
        "8",
        "--format",
        "json",
        env={"HF_HUB_CACHE": str(cache), **env},
    )
    assert r.returncode == 0, r.stderr + r.stdout
    serve = json.loads(r.stdout)["serve"]
    assert (
        serve.startswith("vllm serve moonshotai/Kimi-K2.5 ")
        and '"model": "acme/kimi-eagle3"' in serve
    )
