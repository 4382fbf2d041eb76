"""doctor's checks of the serve command: its flags (repeated, not
interpreted), --speculative-config, a forced attention backend and
--max-model-len against the drafter's positions."""

from __future__ import annotations

from typing import Any

from ..behaviour import V2_ENV, runner_refused
from ..pair import Pair
from ..report import Finding
from ..served import OTHER_METHODS
from .vllm import defect

# draft tokens per step above which num_speculative_tokens is said to be too many
# (EAGLE-3 drafters are trained and served with a few: 1-8)
MANY_TOKENS = 16


def check_serve_flags(p: Pair) -> Finding:
    s = p.serve
    if not s.given:
        return Finding(
            "serve_flags",
            "info",
            "no serve command given (--target/--drafter): checked with the flags shown below; "
            "give the real one after `--` to check its flags",
        )
    read = [f"TP {s.tensor_parallel_size}", f"PP {s.pipeline_parallel_size}"]
    if s.max_model_len is not None:
        read.append(f"max_model_len {s.max_model_len}")
    if s.enforce_eager:
        read.append("enforce-eager (no CUDA graphs, for the drafter too)")
    if s.attention_backend:
        read.append(f"attention backend {s.attention_backend}")
    for k in ("VLLM_USE_V2_MODEL_RUNNER", "VLLM_PP_LAYER_PARTITION"):
        if p.environ.get(k):
            read.append(f"{k}={p.environ[k]}")
    msg = "read: " + ", ".join(read)
    if s.repeated:
        twice = "; ".join(f"`{a}`, then `{b}`" for a, b in s.repeated)
        msg += f"; given twice, vLLM takes the last (the command below keeps it): {twice}"
    if s.uninterpreted:
        msg += "; not interpreted (kept as written, their effect not checked): " + ", ".join(
            s.uninterpreted
        )
    return Finding("serve_flags", "warning" if s.repeated or s.uninterpreted else "info", msg)


def check_model_runner(p: Pair) -> Finding:
    """The model runner the release serves the pair with, and whether the
    environment's VLLM_USE_V2_MODEL_RUNNER lets vLLM start."""
    r, rel, rn = p.rules, p.release, p.runner.upper()
    refused = runner_refused(r, p.environ)
    if refused:
        return Finding(
            "model_runner",
            "error",
            f"{V2_ENV}={p.environ[V2_ENV]}: vLLM {rel} has no V1 model runner and refuses to "
            f"start ({refused}); unset it: the V2 runner serves every target",
            {"unset": (V2_ENV,)},
        )
    if len(r.runners) == 1:
        return Finding(
            "model_runner", "info", f"vLLM {rel} has one model runner, {rn}: it serves the pair"
        )
    forced = p.environ.get(V2_ENV)
    why = f"{V2_ENV}={forced}" if forced else "the release's default for this target"
    return Finding("model_runner", "info", f"vLLM {rel} serves the pair on its {rn} runner ({why})")


def check_speculative_config(p: Pair) -> Finding:
    spec, rel = p.serve.spec, p.release
    method, k = spec.get("method"), p.serve.num_speculative_tokens
    if method is None:
        return Finding(
            "speculative_config",
            "warning",
            'no "method" in --speculative-config: vLLM guesses it from the drafter\'s name '
            '(eagle3 only when the name says so); give "method": "eagle3"',
            {"spec_method": "eagle3"},
        )
    # DFlash, DSpark and MTP drafters of a serving.toml target: checked for
    # what they read of the target (checks/models.py)
    other = method in OTHER_METHODS and p.served is not None
    if method != "eagle3" and not other:
        return Finding(
            "speculative_config",
            "error",
            f"method {method!r}: vLLM {rel} loads the drafter as {method}, not as an EAGLE-3 "
            'head, and its fc, aux layers and weights do not fit; give "method": "eagle3"',
            {"spec_method": "eagle3"},
        )
    if k is None:
        return Finding(
            "speculative_config",
            "error",
            "no num_speculative_tokens: vLLM refuses the speculative config (it is needed "
            'unless the drafter config says n_predict); e.g. "num_speculative_tokens": 3',
            {"spec_num_speculative_tokens": 3},
        )
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        return Finding(
            "speculative_config",
            "error",
            f"num_speculative_tokens {k!r}: vLLM needs a whole number >= 1",
            {"spec_num_speculative_tokens": 3},
        )
    dtp, tp = p.serve.draft_tensor_parallel_size, p.serve.tensor_parallel_size
    if dtp is not None and dtp not in (1, tp):
        return Finding(
            "speculative_config",
            "error",
            f"draft_tensor_parallel_size {dtp!r}: vLLM {rel} accepts only 1 or the target's "
            f"TP ({tp}) and refuses the config (SpeculativeConfig._verify_and_get_draft_tp); "
            "leave it out",
            {"spec_draft_tensor_parallel_size": None},
        )
    tp_note = "" if dtp is None else f", draft_tensor_parallel_size {dtp}"
    said = f"{method}, {k} draft tokens per step{tp_note}"
    if k > MANY_TOKENS:
        return Finding(
            "speculative_config",
            "warning",
            f"{said}: far more than an EAGLE-3 drafter proposes well (drafters are trained to "
            "draft a few; each further token is accepted less often and costs a drafter "
            f"forward); what vLLM {rel} does with so many is not checked; e.g. 3",
        )
    return Finding("speculative_config", "info", said)


def check_attention_backend(p: Pair) -> Finding:
    s, rel, rn = p.serve, p.release, p.runner
    b = s.attention_backend
    if not b:
        return Finding(
            "attention_backend", "info", "no forced attention backend: vLLM picks one per model"
        )
    where = f"{b} (from {s.attention_from})"
    mla_target = p.target.family != "other" and p.environ.get("VLLM_MLA_DISABLE") != "1"
    if p.eff.mla or not mla_target or rn not in p.rules.forced_backend_crash:
        return Finding(
            "attention_backend",
            "info",
            f"{where} forced for the target and the drafter; vLLM {rel} ({rn.upper()} model "
            "runner) builds both with it",
        )
    what = (
        f"{where} is forced on every attention layer, the {p.eff.arch or 'Llama'} drafter's "
        f"too: vLLM {rel} ({rn.upper()} model runner) applies the MLA target's forced backend "
        "to the non-MLA drafter and fails loading it"
    )
    return defect(
        p,
        f"forced_backend_{rn}",
        "attention_backend",
        what,
        f"drop {s.attention_from} (vLLM picks MLA for the target itself)",
        {"attention_backend": None},
    )


def rope_type(cfg: dict[str, Any]) -> str:
    """The drafter's RoPE type as vLLM reads it (rope_parameters, else
    rope_scaling; "default" without either)."""
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    kind = rope.get("rope_type", rope.get("type")) if isinstance(rope, dict) else None
    return str(kind or "default")


def check_max_model_len(p: Pair) -> Finding:
    s, rel = p.serve, p.release
    dpos = p.cfg.get("max_position_embeddings")
    length, given = s.max_model_len, True
    if length is None:
        length, given = p.target.max_position_embeddings, False
    src = "--max-model-len" if given else "vLLM's default, the target's max_position_embeddings"
    if not isinstance(dpos, int) or isinstance(dpos, bool):
        return Finding(
            "max_model_len",
            "warning",
            "the drafter config has no max_position_embeddings: its positions are not checked",
        )
    if length is None:
        return Finding(
            "max_model_len",
            "warning",
            "the target config has no max_position_embeddings; give --max-model-len",
        )
    if length <= dpos:
        return Finding(
            "max_model_len",
            "info",
            f"max_model_len {length} ({src}) within the drafter's {dpos} positions",
        )
    kind = rope_type(p.cfg)
    if p.runner in p.rules.draft_caps_max_model_len and kind not in p.rules.cache_only_rope_types:
        return Finding(
            "max_model_len",
            "warning",
            f"max_model_len {length} ({src}) is above the drafter's max_position_embeddings "
            f"{dpos}, and its RoPE ({kind}) does not share the target's positions: vLLM {rel} "
            f"({p.runner.upper()} model runner) lowers the served max_model_len to {dpos} at "
            f"start (a warning in its log) and refuses longer prompts; serve with "
            f"--max-model-len {dpos} to say so, or use a drafter trained for {length} positions",
            {"max_model_len": dpos},
        )
    if not p.rules.draft_positions_short:
        return Finding(
            "max_model_len",
            "info",
            f"max_model_len {length} ({src}) above the drafter's max_position_embeddings "
            f"{dpos}: vLLM {rel} builds the drafter's positions for max_model_len",
        )
    what = (
        f"max_model_len {length} ({src}) is above the drafter's max_position_embeddings "
        f"{dpos}: vLLM {rel} builds the drafter's positions for {dpos} only, and a running "
        f"server dies on the first prompt longer than that"
    )
    return defect(
        p,
        "draft_positions",
        "max_model_len",
        what,
        f"serve with --max-model-len {dpos}",
        {"max_model_len": dpos},
    )
