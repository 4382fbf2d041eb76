"""doctor's checks of the serve command: its flags (repeated, not
interpreted), --speculative-config (its method and tokens, then every key as
the release reads it), a forced attention backend (the target's and the
drafter's), --max-model-len against the drafter's positions and the
speculative config's max_model_len, and the drafter's KV cache dtype."""

from __future__ import annotations

from typing import Any

from ..behaviour import V2_ENV, backend_refused, kv_connectors, runner_refused
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
    if s.data_parallel_size > 1:
        read.append(f"DP {s.data_parallel_size}")
    if s.expert_parallel:
        read.append("expert parallel")
    if s.language_model_only:
        read.append("language model only")
    if s.kv_cache_dtype:
        read.append(f"KV cache {s.kv_cache_dtype}")
    if s.max_num_batched_tokens is not None:
        read.append(f"max_num_batched_tokens {s.max_num_batched_tokens}")
    if s.kv_transfer:
        read.append(f"KV transfer {'/'.join(kv_connectors(s.kv_transfer)) or '(no connector)'}")
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
    spec, rel = p.spec, p.release
    method, k = spec.get("method"), spec.get("num_speculative_tokens")
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
    dtp, tp = spec.get("draft_tensor_parallel_size"), p.serve.tensor_parallel_size
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


# What rejection_sample_method and draft_sample_method do (config/speculative.py:
# the fields' docstrings in the newest release; older ones take fewer values:
# Rules.rejection_sample_methods, draft_sample_methods). A lossy one gives
# output that is not the target's: a warning.
SAMPLING = {
    "standard": ("probabilistic rejection sampling against the target", False),
    "block": ("block verification of the drafts against the target", False),
    "synthetic": (
        "drafts accepted at synthetic rates (synthetic_acceptance_rates/_length), not "
        "verified against the target: the output is not the target's (a benchmarking mode)",
        True,
    ),
    "fly": ("FLy's lossy, entropy-gated acceptance: the output is not the target's", True),
    "probabilistic": ("a rejection sampling the release names so", False),
    "strict": ("strict rejection sampling", False),
    "greedy": ("the drafter proposes its argmax", False),
    "gumbel": ("the drafter samples with Gumbel noise", False),
}
# Keys other checks judge (their finding says what vLLM does with them).
JUDGED_ELSEWHERE = {
    "method": "speculative_config",
    "model": "the drafter read",
    "num_speculative_tokens": "speculative_config",
    "draft_tensor_parallel_size": "speculative_config",
    "revision": "the drafter's revision, read",
    "max_model_len": "max_model_len",
    "attention_backend": "attention_backend",
    "kv_cache_dtype": "draft_kv_cache",
}


def check_speculative_keys(p: Pair) -> Finding:
    """Every key of the speculative config (and the --spec-* flags) as the
    release reads it: behaviour.speculative; then what the keys no other
    check judges do to EAGLE-3."""
    r, rel, sp, rn = p.rules, p.release, p.speculative, p.runner
    fix: dict[str, Any] = {}
    if p.serve.spec_flags and (not r.spec_flags or len(sp.merged) < len(p.serve.spec_flags)):
        fix["merge_spec_flags"] = True
    for key in p.serve.spec:
        under = key.replace("-", "_")
        if key in r.spec_fields or (r.spec_dashed and under in r.spec_fields):
            continue
        # a key the release lacks goes (the message names the field it may
        # have meant); a dashed one it reads only underscored is renamed
        if under != key and under in r.spec_fields and under not in p.serve.spec:
            fix[f"spec_{under}"] = p.serve.spec[key]
        fix[f"spec_{key}"] = None
    refused = list(sp.refused)
    notes, worst = [], "info"
    for key, value in sp.config.items():
        if key in JUDGED_ELSEWHERE:
            continue
        if key in ("rejection_sample_method", "draft_sample_method"):
            allowed = (
                r.rejection_sample_methods
                if key == "rejection_sample_method"
                else r.draft_sample_methods
            )
            if value not in allowed:  # refused: behaviour.speculative says so
                fix[f"spec_{key}"] = None
                continue
            what, lossy = SAMPLING.get(str(value), ("", False))
            notes.append(f"{key} {value!r}" + (f": {what}" if what else ""))
            worst = "warning" if lossy else worst
        elif key == "enforce_eager":
            if f"{rn}:enforce_eager" in r.spec_applied:
                notes.append(
                    f"enforce_eager {value!r}: the {rn.upper()} runner builds the drafter so"
                )
            else:
                notes.append(
                    f"enforce_eager {value!r}: ignored, vLLM {rel}'s {rn.upper()} runner reads no "
                    "speculative_config.enforce_eager (the drafter follows the target's "
                    "--enforce-eager)"
                )
                worst = "warning"
        elif key == "quantization":
            notes.append(
                f"quantization {value!r}: the drafter's weights are loaded so (its "
                "draft model config)"
            )
        elif key == "num_speculative_tokens_per_batch_size":
            notes.append(
                f"num_speculative_tokens_per_batch_size {value!r}: the draft tokens per step "
                "are chosen by the batch size ((first, last, tokens) ranges)"
            )
        else:
            notes.append(f"{key} {value!r}")
    for key in sp.ignored:
        notes.append(
            f"{key} is no key of vLLM {rel}'s speculative config: dropped without a word "
            "(its pydantic dataclass ignores extra keys)"
        )
        worst = "warning"
    merged = (
        f"; {', '.join(sp.merged)} merged into the speculative config "
        "(engine/arg_utils.py create_speculative_config)"
        if sp.merged
        else ""
    )
    if refused:
        return Finding("speculative_keys", "error", "; ".join(refused), fix)
    said = "; ".join(notes) if notes else "none beyond those judged in the other findings"
    keys = ", ".join(sp.config) or "none"
    return Finding(
        "speculative_keys",
        worst,
        f"keys read by vLLM {rel} (SpeculativeConfig): {keys}{merged}; {said}",
        fix,
    )


# Where each runner builds the EAGLE drafter's vllm_config (Rules.spec_applied
# reads them): what the speculative config's attention_backend, kv_cache_dtype
# and enforce_eager reach.
DRAFT_BUILDER = {
    "v1": "v1/spec_decode/llm_base_proposer.py SpecDecodeBaseProposer._create_draft_vllm_config",
    "v2": "v1/worker/gpu/spec_decode/eagle/utils.py load_eagle_model",
}


def spec_backend(p: Pair) -> Any:
    """The speculative config's attention_backend ("auto" = none)."""
    sb = p.spec.get("attention_backend")
    return None if isinstance(sb, str) and sb.lower() == "auto" else sb


def check_attention_backend(p: Pair) -> Finding:
    """The target's forced backend (--attention-backend, --attention-config,
    VLLM_ATTENTION_BACKEND) and the speculative config's attention_backend:
    names the release lacks, which one builds the drafter on the runner
    (Rules.spec_applied), and a forced backend that reaches a Llama drafter
    of an MLA target (Rules.forced_backend_crash)."""
    s, r, rel, rn = p.serve, p.rules, p.release, p.runner
    b, sb = s.attention_backend, spec_backend(p)
    where = f"{b} (from {s.attention_from})"
    refused: list[str] = []
    fix: dict[str, Any] = {}
    if e := backend_refused(b, r):
        refused.append(f"{where}: vLLM {rel} refuses it at startup ({e})")
        fix["attention_backend"] = None
    if e := backend_refused(sb, r):
        refused.append(
            f"the speculative config's attention_backend {sb!r}: vLLM {rel} refuses it at "
            f"startup (SpeculativeConfig._parse_attention_backend: {e})"
        )
        fix["spec_attention_backend"] = None
    if refused:
        return Finding("attention_backend", "error", "; ".join(refused), fix)
    draft, ignored = "", False
    if sb is not None:
        if f"{rn}:attention_backend" in r.spec_applied:
            draft = (
                f"the speculative config's attention_backend {sb} builds the drafter (vLLM "
                f"{rel}, {rn.upper()} model runner: {DRAFT_BUILDER[rn]})"
            )
        else:
            since = p.pins.rules.first_where(lambda x: f"{rn}:attention_backend" in x.spec_applied)
            draft = (
                f"the speculative config's attention_backend {sb} is ignored: vLLM {rel}'s "
                f"{rn.upper()} model runner does not build the drafter with it ({DRAFT_BUILDER[rn]}"
                f"{f' reads it from {since}' if since else ' never reads it'}), so the drafter "
                "gets "
                + (
                    f"the target's forced {b}"
                    if b and rn in r.forced_backend_crash
                    else "a backend vLLM picks"
                )
            )
            ignored = True
    if not b:
        if not draft:
            return Finding(
                "attention_backend", "info", "no forced attention backend: vLLM picks one per model"
            )
        return Finding(
            "attention_backend",
            "warning" if ignored else "info",
            f"no forced backend for the target (vLLM picks one); {draft}",
        )
    if draft and not ignored:
        return Finding("attention_backend", "info", f"{where} forced for the target; {draft}")
    mla_target = p.target.family != "other" and p.environ.get("VLLM_MLA_DISABLE") != "1"
    if p.eff.mla or not mla_target or rn not in r.forced_backend_crash:
        return Finding(
            "attention_backend",
            "warning" if ignored else "info",
            f"{where} forced for the target and the drafter; vLLM {rel} ({rn.upper()} model "
            "runner) builds both with it" + (f"; {draft}" if draft else ""),
        )
    what = (
        f"{where} is forced on every attention layer, the {p.eff.arch or 'Llama'} drafter's "
        f"too: vLLM {rel} ({rn.upper()} model runner) applies the MLA target's forced backend "
        "to the non-MLA drafter and fails loading it" + (f" ({draft})" if draft else "")
    )
    return defect(
        p,
        f"forced_backend_{rn}",
        "attention_backend",
        what,
        f"drop {s.attention_from} (vLLM picks MLA for the target itself)",
        {"attention_backend": None},
    )


def check_draft_kv_cache(p: Pair) -> Finding:
    """The drafter's KV cache dtype: the speculative config's kv_cache_dtype
    where the runner builds the drafter with it (Rules.spec_applied), else
    the target's --kv-cache-dtype, which the drafter's cache config is (the
    draft's vllm_config is the worker's: DRAFT_BUILDER)."""
    r, rel, rn = p.rules, p.release, p.runner
    target = p.serve.kv_cache_dtype or "auto"
    own = p.spec.get("kv_cache_dtype")
    layers = "its MLA latent KV" if p.eff.mla else "its KV"
    if own is not None and f"{rn}:kv_cache_dtype" in r.spec_applied:
        return Finding(
            "draft_kv_cache",
            "info",
            f"the drafter's KV cache is {own} (the speculative config's kv_cache_dtype; vLLM "
            f"{rel}, {rn.upper()} model runner: {DRAFT_BUILDER[rn]}), the target's {target}",
        )
    if target == "auto":
        return Finding(
            "draft_kv_cache", "info", "KV cache dtype auto, the drafter's as the target's"
        )
    return Finding(
        "draft_kv_cache",
        "info",
        f"--kv-cache-dtype {target}: the drafter's cache is {target} too ({layers}: vLLM {rel} "
        f"builds the drafter with the target's cache config, {DRAFT_BUILDER[rn]}, the "
        "speculative config giving no kv_cache_dtype"
        + ("" if "kv_cache_dtype" in r.spec_fields else f", which vLLM {rel} does not take")
        + ")",
    )


def rope_type(cfg: dict[str, Any]) -> str:
    """The drafter's RoPE type as vLLM reads it (rope_parameters, else
    rope_scaling; "default" without either)."""
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    kind = rope.get("rope_type", rope.get("type")) if isinstance(rope, dict) else None
    return str(kind or "default")


SEVERITY = ("info", "warning", "error")


def check_max_model_len(p: Pair) -> Finding:
    """The served max_model_len against the speculative config's max_model_len
    (config/speculative.py SpeculativeConfig._maybe_override_draft_max_model_len
    sets the draft model config's with it, and refuses one above the
    target's; config/vllm.py VllmConfig._limit_max_model_len_to_draft lowers
    the served one to the draft's where Rules.draft_caps_max_model_len), then
    against the drafter's own positions (_positions)."""
    s, rel, rn = p.serve, p.release, p.runner
    length, given = s.max_model_len, True
    if length is None:
        length, given = p.target.max_position_embeddings, False
    src = "--max-model-len" if given else "vLLM's default, the target's max_position_embeddings"
    rest = _positions(p, length, src)
    if "max_model_len" not in p.spec or length is None:
        return rest
    spec_len = p.spec["max_model_len"]
    said = f'the speculative config\'s "max_model_len" {spec_len!r}'
    drop = {"spec_max_model_len": None}
    if not isinstance(spec_len, int) or isinstance(spec_len, bool) or spec_len < 1:
        return Finding(
            "max_model_len",
            "error",
            f"{said}: vLLM {rel} needs a whole number >= 1 (pydantic refuses it at startup)",
            drop,
        )
    if spec_len > length:
        return Finding(
            "max_model_len",
            "error",
            f"{said} is above the served max_model_len {length} ({src}): vLLM {rel} refuses "
            f"it at startup (ValueError: speculative_max_model_len={spec_len} cannot be larger "
            f"than target_max_model_len={length}; config/speculative.py "
            "_maybe_override_draft_max_model_len)",
            drop,
        )
    if spec_len == length:
        return rest
    kind = rope_type(p.cfg)
    lowers = rn in p.rules.draft_caps_max_model_len and kind not in p.rules.cache_only_rope_types
    if not lowers:
        return Finding(
            "max_model_len",
            rest.severity,
            f"{said} sets only the draft model config's max_model_len "
            "(SpeculativeConfig._maybe_override_draft_max_model_len): vLLM "
            f"{rel} ({rn.upper()} model runner) serves max_model_len {length} ({src})"
            + (
                ""
                if rn not in p.rules.draft_caps_max_model_len
                else f", the drafter's RoPE ({kind}) sharing the target's positions"
            )
            + f"; {rest.message}",
            rest.fix,
        )
    worst = max("warning", rest.severity, key=SEVERITY.index)
    return Finding(
        "max_model_len",
        worst,
        f"{said} is below the served max_model_len {length} ({src}), and the drafter's RoPE "
        f"({kind}) does not share the target's positions: vLLM {rel} ({rn.upper()} model "
        f"runner) lowers the served max_model_len from {length} to {spec_len} at start "
        "(config/vllm.py VllmConfig._limit_max_model_len_to_draft, a warning in its log: "
        f"'reducing max_model_len to {spec_len}') and refuses every prompt longer than that; "
        f'drop "max_model_len" from the speculative config to serve {length}; without it: '
        f"{rest.message}",
        {**drop, **rest.fix},
    )


def _positions(p: Pair, length: int | None, src: str) -> Finding:
    """The served max_model_len against the drafter's max_position_embeddings."""
    rel = p.release
    dpos = p.cfg.get("max_position_embeddings")
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
