"""doctor's checks of the drafter's shapes against the target's: hidden
size, the fc's width and its tensor, vocabularies and d2t, embeddings and
lm_head, attention heads under tensor parallelism, and the weights doctor
can read (safetensors headers only)."""

from __future__ import annotations

from ..pair import Pair, show_ids
from ..report import Finding


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
                since = p.pins.rules.first_where(lambda r: r.fc_width == "config")
                hint += f" ({since}+ read num_aux_hidden_states)" if since else ""
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
    dp = p.serve.data_parallel_size
    each = (
        f"; DP {dp}: each of the {dp} data-parallel ranks builds a drafter of its own with its "
        "TP group's config (in the worker, from its vllm_config: the V2 runner's "
        "v1/worker/gpu/spec_decode/eagle/utils.py load_eagle_model, the V1 proposer's "
        "load_model), and expert parallelism leaves the dense drafter whole"
        if dp > 1
        else ""
    )
    return Finding("tensor_parallel", "info", f"TP {tp}: the drafter runs with TP {tp} too{each}")


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
