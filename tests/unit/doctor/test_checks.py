"""`vpatch doctor` on real-shaped pairs (tests/support/pairs.py: Kimi-K2.5,
Kimi-K2, DeepSeek-V3 targets; vLLM-format, speculators and MLA drafters with
header-only safetensors), one test per check and broken variant, per release
where vLLM's behaviour differs; then the command itself (JSON, exit codes,
one-line errors). The tier (tests/vllm/release/test_doctor_verdicts.py) shows
the same verdicts on real vLLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import pairs as F
from vpatch import lock
from vpatch.doctor import checks as doctor
from vpatch.doctor import hub, serve
from vpatch.doctor import releases as R
from vpatch.doctor.environment import Readiness, VllmEnv

IDS_KEY = "eagle_aux_hidden_state_layer_ids"
PINS = lock.load()


def span(key: str) -> tuple[str, str, str | None]:
    """Where vpatch's series carries the fix of defect `key` (its first and
    last release, patches.toml) and the first release that has it itself
    (its DEP-3 Applied-Upstream; None: none yet)."""
    slug = R.fix(PINS, key)
    assert slug is not None, key
    variants = PINS.patchset.variants[slug]
    return variants[0].first, variants[-1].last, PINS.patchset.upstream(slug).release


_, FINAL_LAST, FINAL_FIXED = span("final_norm_id")
ROPE_FIRST, ROPE_LAST, ROPE_FIXED = span("mla_rope_theta")


def check(
    tmp: Path,
    version: str | None = "0.17.1",
    ready: bool | None = True,
    tp: int = 8,
    pp: int = 1,
    command=None,
    max_len: str | None = None,
    patches: dict | None = None,
    environ: dict | None = None,
    **kw,
) -> doctor.Report:
    t, d = F.pair(tmp, **kw)
    env = VllmEnv("python3", "vllm" if version else None, version, "/x" if version else None)
    s = serve.from_options(str(t), str(d), tp, pp, remote=True)
    if command is not None or max_len is not None:
        spec = {"method": "eagle3", "model": str(d), "num_speculative_tokens": 3}
        words = ["vllm", "serve", str(t), "--trust-remote-code", "-tp", str(tp)]
        words += ["--max-model-len", max_len] if max_len else []
        words += [*(command or []), "--speculative-config", json.dumps(spec)]
        s = serve.parse(words)
    readiness = Readiness(ready, dict(patches or {}), known=ready is not None)
    return doctor.diagnose(
        hub.resolve(str(t)), hub.resolve(str(d)), env, readiness, s, environ, pins=PINS
    )


def diag(t: Path, d: Path, env: VllmEnv) -> doctor.Report:
    s = serve.from_options(str(t), str(d), 8)
    return doctor.diagnose(
        hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, {}, pins=PINS
    )


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


@pytest.mark.parametrize("version,ok", [("0.17.1", True), (FINAL_LAST, False), (FINAL_FIXED, True)])
def test_final_norm_id(tmp_path, version, ok):
    r = check(tmp_path, version, config={IDS_KEY: [2, 30, 61]})
    assert r.ok == ok, r.to_text()
    if not ok:
        assert errors(r) == {"aux_layers"} and FINAL_FIXED in find(r, "aux_layers").message


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
    assert "acceptance 0.43 -> 0.36" in find(r, "aux_layers").message  # measured, cited
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


# -- aux layer ids: where they are written, in which convention -------------------
# vLLM's id k is the input of layer k; SGLang/SpecForge drafters write the
# output of layer k and start at 1 (SGLang shifts such a list by one).

NO_ENV: dict = {}


@pytest.mark.parametrize(
    "version,environ,severity",
    [
        ("0.17.1", NO_ENV, "error"),  # ignored: the default (2, 30, 58) is fed
        ("0.21.0", NO_ENV, "error"),
        ("0.25.0", NO_ENV, "warning"),  # the V1 runner reads them: right, but not portable
        ("0.32.0", NO_ENV, "error"),  # the V2 runner (default) ignores them
        ("0.32.0", {"VLLM_USE_V2_MODEL_RUNNER": "0"}, "warning"),
    ],
)
def test_ids_only_nested_in_vllms_convention(tmp_path, version, environ, severity):
    cfg = {"eagle_config": {IDS_KEY: [3, 30, 58]}}
    r = check(tmp_path, version, delete=(IDS_KEY,), config=cfg, environ=environ)
    assert sev(r, "trained_layers") == severity, r.to_text()
    assert r.ok == (severity != "error")
    if severity == "error":
        assert f"top-level {IDS_KEY}: [3, 30, 58]" in find(r, "trained_layers").message


def test_the_runner_variable_in_the_command_counts(tmp_path):
    cfg = {"eagle_config": {IDS_KEY: [3, 30, 58]}}

    def spec(d):
        s = {"method": "eagle3", "model": str(d), "num_speculative_tokens": 3}
        return ["--speculative-config", json.dumps(s)]

    t, d = F.pair(tmp_path, delete=(IDS_KEY,), config=cfg)
    env = VllmEnv("python3", "vllm", "0.32.0", "/x")
    for words, want in (([], "error"), (["VLLM_USE_V2_MODEL_RUNNER=0"], "warning")):
        s = serve.parse([*words, "vllm", "serve", str(t), "--trust-remote-code", *spec(d)])
        r = doctor.diagnose(
            hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, {}, pins=PINS
        )
        assert sev(r, "trained_layers") == want, r.to_text()


@pytest.mark.parametrize(
    "version,environ,ok",
    [
        ("0.17.1", NO_ENV, True),  # ignored: the default (2, 30, 58) is what [1, 29, 57] means
        ("0.21.0", NO_ENV, True),
        ("0.25.0", NO_ENV, False),  # the V1 runner reads [1, 29, 57] as written: one off
        ("0.28.0", NO_ENV, False),
        ("0.32.0", NO_ENV, True),
        ("0.32.0", {"VLLM_USE_V2_MODEL_RUNNER": "0"}, False),
    ],
)
def test_specforge_deepseek_v3_drafter(tmp_path, version, environ, ok):
    """SpecForge's DeepSeek-V3 drafter: [1, 29, 57] only in eagle_config, in the
    output-of-layer-k convention: physically vLLM's [2, 30, 58], the default."""
    r = check(tmp_path, version, target="deepseek_v3", fmt="specforge_dsv3", environ=environ)
    f = find(r, "trained_layers")
    assert (f.severity != "error") == ok, r.to_text()
    assert "[2, 30, 58] in vLLM's terms" in f.message and "first id is 1" in f.message
    assert "measuring acceptance with" in f.message  # it cannot know for sure
    if ok:
        assert r.ok, r.to_text()
    else:
        assert "one layer early" in f.message
        assert f"write the top-level {IDS_KEY}: [2, 30, 58]" in f.message


@pytest.mark.parametrize("version", ["0.17.1", "0.25.0", "0.32.0"])
def test_copying_output_convention_ids_to_the_top_level_is_one_off(tmp_path, version):
    """What the old advice ("copy them to the top-level") made of SpecForge's
    drafter: [1, 29, 57] fed as written, one layer early, on every release."""
    r = check(
        tmp_path,
        version,
        target="deepseek_v3",
        fmt="specforge_dsv3",
        config={IDS_KEY: [1, 29, 57]},
    )
    f = find(r, "trained_layers")
    assert f.severity == "error" and "one layer early" in f.message, r.to_text()
    assert f"{IDS_KEY}: [2, 30, 58]" in f.message
    assert "0.43 -> 0.41" in f.message  # measured by make bench-spec, cited


def test_converted_ids_agree_with_the_nested_ones(tmp_path):
    r = check(
        tmp_path / "a", target="deepseek_v3", fmt="specforge_dsv3", config={IDS_KEY: [2, 30, 58]}
    )
    assert sev(r, "trained_layers") == "info" and r.ok, r.to_text()
    r = check(tmp_path / "b", config={"eagle_config": {IDS_KEY: [3, 31, 59]}})
    assert sev(r, "trained_layers") == "warning" and r.ok
    assert "disagree" in find(r, "trained_layers").message


def test_specforge_kimi_k25_drafter_ids(tmp_path):
    """SpecForge's Kimi-K2.5 drafter: [2, 30, 58] nested, vLLM's convention."""
    r = check(tmp_path / "a", "0.32.0", fmt="specforge_kimi", max_len="128K")
    f = find(r, "trained_layers")
    assert f.severity == "info" and "first id is not 1" in f.message and r.ok, r.to_text()


def test_speculators_ids_are_vllms_convention(tmp_path):
    r = check(tmp_path, "0.32.0", fmt="speculators", config={IDS_KEY: [1, 29, 57]})
    f = find(r, "trained_layers")
    assert f.severity == "info" and "speculators format" in f.message, r.to_text()
    assert "measuring acceptance" not in f.message


def test_nested_four_ids_size_the_fc_on_0_22(tmp_path):
    """0.22+ size fc by the nested ids while the V2 runner feeds 3 states."""
    r = check(
        tmp_path,
        "0.32.0",
        delete=(IDS_KEY,),
        config={"eagle_config": {IDS_KEY: [2, 15, 30, 57]}},
        tensors={"fc.weight": ("BF16", [F.HIDDEN, 4 * F.HIDDEN])},
    )
    assert {"trained_layers", "fc"} <= errors(r)


# -- fc and hidden sizes -------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.17.1", "0.32.0"])
def test_fc_for_four_states(tmp_path, version):
    r = check(
        tmp_path,
        version,
        config={IDS_KEY: [2, 15, 30, 57]},
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
        config={IDS_KEY: [2, 15, 30, 57], "num_aux_hidden_states": 4},
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
    env = VllmEnv("python3", "vllm", "0.17.1", "/x")
    r = diag(t, d, env)
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
    assert ("--pipeline-parallel-size 2" in r.serve) == ok  # the printed command drops PP
    assert ("--tensor-parallel-size 8" in r.serve) != ok
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
    env = VllmEnv("python3", "vllm", "0.17.1", "/x")
    r = diag(t, d, env)
    assert r.ok and sev(r, "weights") == "warning" and sev(r, "d2t") == "warning"


def test_no_weights(tmp_path):
    t, d = F.pair(tmp_path)
    (d / "model.safetensors").unlink()
    env = VllmEnv("python3", "vllm", "0.17.1", "/x")
    r = diag(t, d, env)
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
    env = VllmEnv("python3", "vllm", "0.32.0", "/x")
    r = diag(t, d, env)
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
    env = VllmEnv("python3", "vllm", "0.32.0", "/x")
    r = diag(t, d, env)
    assert r.ok and sev(r, "target") == "warning"
    assert "--trust-remote-code" not in r.serve


# -- defects the series fixes: told by `vpatch check`'s per-patch report --------------------

FORCED = ["--attention-backend", "FLASHMLA"]


def named(version: str, key: str) -> str:
    """The name `vpatch check` reports the fix of defect `key` under in
    `version`'s series (NNNN-slug: its place there, from the patch set)."""
    slug = R.fix(PINS, key)
    return next(n.removesuffix(".patch") for n, v in PINS.patchset.named(version) if v.slug == slug)


def _patch(version: str, key: str, state: str) -> dict:
    return {named(version, key): state}


@pytest.mark.parametrize(
    "version,fmt,environ,broken",
    [
        ("0.17.1", "vllm", NO_ENV, True),  # V1 runner up to 0.20.2
        ("0.20.2", "vllm", NO_ENV, True),
        ("0.21.0", "vllm", NO_ENV, False),
        ("0.28.0", "vllm", NO_ENV, False),
        ("0.29.0", "vllm", NO_ENV, True),  # V2 runner from 0.29.0
        ("0.32.0", "vllm", NO_ENV, True),
        ("0.32.0", "vllm", {"VLLM_USE_V2_MODEL_RUNNER": "0"}, False),
        ("0.32.0", "mla", NO_ENV, False),  # an MLA drafter takes the MLA backend
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
    r = check(tmp_path, "0.32.0", command=flags)
    assert (
        sev(r, "attention_backend") == "error"
        and "FLASHMLA" in r.serve.split("--spec")[0]
        or ("FLASHMLA" not in r.serve)
    )
    assert sev(r, "attention_backend") == "error"


def test_forced_attention_backend_from_the_environment(tmp_path):
    t, d = F.pair(tmp_path)
    spec = {"method": "eagle3", "model": str(d), "num_speculative_tokens": 3}
    words = ["VLLM_ATTENTION_BACKEND=FLASHMLA", "vllm", "serve", str(t), "--trust-remote-code"]
    s = serve.parse([*words, "--speculative-config", json.dumps(spec)])
    env = VllmEnv("python3", "vllm", "0.32.0", "/x")
    r = doctor.diagnose(
        hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, {}, pins=PINS
    )
    assert "VLLM_ATTENTION_BACKEND" in find(r, "attention_backend").message
    assert sev(r, "attention_backend") == "error" and "VLLM_ATTENTION_BACKEND" not in r.serve


@pytest.mark.parametrize(
    "state,severity,phrase",
    [
        ("applied", "info", "is installed"),
        ("upstream", "info", "is installed"),
        ("missing", "error", "run `vpatch install"),
        ("modified", "error", "run `vpatch install"),
    ],
)
def test_a_defect_is_fixed_when_vpatch_check_says_its_patch_is(tmp_path, state, severity, phrase):
    r = check(
        tmp_path, "0.32.0", command=FORCED, patches=_patch("0.32.0", "forced_backend_v2", state)
    )
    f = find(r, "attention_backend")
    assert f.severity == severity and phrase in f.message, r.to_text()
    assert ("--attention-backend" in r.serve) == (severity == "info")


def test_a_defect_not_in_the_series_and_an_unknown_report(tmp_path):
    r = check(tmp_path / "a", "0.32.0", command=FORCED)
    assert "has no fix" in find(r, "attention_backend").message
    r = check(tmp_path / "b", "0.32.0", None, command=FORCED)
    assert "could not say" in find(r, "attention_backend").message
    assert sev(r, "attention_backend") == "error"


@pytest.mark.parametrize(
    "version,max_len,broken",
    [
        ("0.26.0", None, True),  # vLLM's default: the target's 262144 > the drafter's 131072
        ("0.26.0", "200k", True),
        ("0.26.0", "128K", False),  # 131072
        ("0.26.0", "131072", False),
        ("0.17.1", None, True),
        ("0.27.0", None, False),  # positions cover max_model_len from 0.27.0
        ("0.32.0", "auto", False),
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
            patches=_patch(version, "draft_positions", "applied"),
        )
        assert sev(fixed, "max_model_len") == "info"


@pytest.mark.parametrize(
    "version,rope,broken",
    [
        (ROPE_FIRST, None, True),
        (ROPE_LAST, None, True),
        (ROPE_FIXED, None, False),
        ("0.26.0", "yarn", False),
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
            patches=_patch(version, "mla_rope_theta", "applied"),
        )
        assert sev(r, "rope") == "info"


@pytest.mark.parametrize(
    "version,fmt,broken",
    [
        ("0.22.0", "mla", True),
        ("0.22.1", "mla", True),
        ("0.23.0", "mla", False),
        ("0.22.0", "vllm", False),  # the Llama drafter reads fc_norm from 0.22.0
        ("0.21.0", "vllm", True),  # ... and ignores it before
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
            patches=_patch(version, "mla_fc_norm", "applied"),
        )
        assert sev(r, "norms") == "info"


@pytest.mark.parametrize("version", ["0.18.0", "0.26.0", "0.32.0"])
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
        patches=_patch(version, "kimi_k2_mla", "applied"),
    )
    assert r.ok, r.to_text()


# -- the serve command's own flags ---------------------------------------------------------


def test_uninterpreted_flags_are_said_and_kept(tmp_path):
    r = check(
        tmp_path, "0.32.0", command=["--gpu-memory-utilization", "0.9", "--enable-prefix-caching"]
    )
    f = find(r, "serve_flags")
    assert f.severity == "warning" and "--gpu-memory-utilization" in f.message
    assert "--gpu-memory-utilization 0.9 --enable-prefix-caching" in r.serve
    assert r.to_json()["uninterpreted"] == [
        "--gpu-memory-utilization",
        "--enable-prefix-caching",
    ]


def test_a_flag_given_twice_is_a_warning_naming_both(tmp_path):
    r = check(tmp_path, "0.32.0", tp=2, command=["--tensor-parallel-size", "4"])
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
    env = VllmEnv("python3", "vllm", "0.32.0", "/x")
    r = doctor.diagnose(
        hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, {}, pins=PINS
    )
    f = find(r, "speculative_config")
    assert (f.severity == "error") == broken and phrase in f.message, r.to_text()
    fixed = json.loads(r.serve.split("--speculative-config ")[1].strip("'"))
    assert fixed["method"] == "eagle3" and isinstance(fixed["num_speculative_tokens"], int)
    assert fixed.get("draft_tensor_parallel_size") in (None, 8)


def serve_without_trust(tmp: Path, version: str, target: str, tokenizer: dict | None = None):
    t, d = F.pair(tmp, target=target)
    if tokenizer is not None:
        (t / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    spec = {"method": "eagle3", "model": str(d), "num_speculative_tokens": 3}
    s = serve.parse(["vllm", "serve", str(t), "--speculative-config", json.dumps(spec)])
    env = VllmEnv("python3", "vllm", version, "/x")
    return doctor.diagnose(
        hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, {}, pins=PINS
    )


@pytest.mark.parametrize("version", ["0.15.0", "0.17.1", "0.18.0", "0.26.0", "0.32.0"])
@pytest.mark.parametrize("target", ["kimi_k25", "kimi_k2"])
def test_kimi_targets_need_trust_remote_code_for_their_tokenizer(tmp_path, version, target):
    r = serve_without_trust(tmp_path, version, target)
    f = find(r, "target")
    assert (
        f.severity == "error"
        and "its tokenizer (tokenizer_config.json: TikTokenTokenizer" in f.message
    )
    # the config too where vLLM has no class of its own for kimi_k2
    config_remote = target == "kimi_k2" and version in ("0.15.0", "0.17.1")
    assert ("its config (model_type 'kimi_k2'" in f.message) == config_remote, f.message
    assert "--trust-remote-code" in r.serve


@pytest.mark.parametrize("version", ["0.15.0", "0.17.1", "0.18.0", "0.26.0", "0.32.0"])
def test_deepseek_v3_needs_no_remote_code(tmp_path, version):
    """Its config.json names configuration_deepseek.DeepseekV3Config, but
    transformers has its own; its tokenizer is transformers' LlamaTokenizerFast."""
    r = serve_without_trust(tmp_path, version, "deepseek_v3")
    assert sev(r, "target") == "info" and "--trust-remote-code" not in r.serve
    assert "target" not in errors(r)


@pytest.mark.parametrize("version,broken", [("0.17.1", True), ("0.18.0", False)])
def test_kimi_k2_config_is_remote_code_before_0_18(tmp_path, version, broken):
    """Kimi-K2's config with a transformers tokenizer: only the config speaks."""
    r = serve_without_trust(tmp_path, version, "kimi_k2", F.DSV3_TOKENIZER)
    assert (sev(r, "target") == "error") == broken, r.to_text()


def test_trust_remote_code_not_needed_is_said(tmp_path):
    r = check(tmp_path, "0.32.0", target="deepseek_v3")  # check() gives --trust-remote-code
    assert "--trust-remote-code is not needed" in find(r, "target").message


def test_target_drafter_options_add_trust_remote_code_only_when_needed(tmp_path):
    env = VllmEnv("python3", "vllm", "0.32.0", "/x")
    for target, needed in (("kimi_k25", True), ("deepseek_v3", False)):
        t, d = F.pair(tmp_path / target, target=target)
        s = serve.from_options(str(t), str(d), 8)
        r = doctor.diagnose(
            hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, {}, pins=PINS
        )
        assert ("--trust-remote-code" in r.serve) == needed and r.ok, r.to_text()


# -- a YaRN drafter's rotary range ---------------------------------------------------

KIMI_YARN_32 = {**F.YARN, "factor": 32.0}  # 4096 x 32 = 131072, as the drafters


@pytest.mark.parametrize("version", ["0.18.0", "0.26.0", "0.27.0", "0.32.0"])
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
        tmp_path, "0.32.0", target="kimi_k25", fmt="torchspec_mla", max_len=max_len,
        config={"rope_scaling": rope},
    )  # fmt: skip
    assert sev(r, "rope_range") == severity, r.to_text()


# -- id n, the final norm's input, where the series carries its fix -------------------------


@pytest.mark.parametrize(
    "version,patches,severity,phrase",
    [
        (FINAL_LAST, {}, "error", "vpatch's series for this release has no fix"),
        (
            FINAL_LAST,
            {named(FINAL_LAST, "final_norm_id"): "missing"},
            "error",
            "run `vpatch install",
        ),
        (FINAL_LAST, {named(FINAL_LAST, "final_norm_id"): "applied"}, "info", "feeds the drafter"),
        (FINAL_FIXED, {}, "info", "feeds the drafter"),
    ],
)
def test_final_norm_id_follows_vpatch_check(tmp_path, version, patches, severity, phrase):
    ids = [2, 30, F.LAYERS]
    r = check(tmp_path, version, patches=patches, config={IDS_KEY: ids})
    f = find(r, "aux_layers")
    assert f.severity == severity and phrase in f.message, r.to_text()
    assert (sev(r, "fc") == "error") is False  # the cause is said once, in aux_layers
