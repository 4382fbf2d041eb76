"""MLA EAGLE-3 drafters for the tiny DeepSeek-V3 target, config only (the
tests here build configs and layers, never load their weights).

Shaped like the public Kimi-K2/K2.5 MLA drafters (TorchSpec, lightseekorg):
architecture ``Eagle3DeepseekV2ForCausalLM``, ``model_type: kimi_k2``, one
layer with DeepSeek-V3's MLA fields, YaRN ``rope_scaling`` with Kimi-K2's
parameters (factor 32 over 4096 positions), draft vocab = vocab (no
``d2t``), ``max_position_embeddings`` 131072 where Kimi-K2.5 serves 262144.
Sizes are the target's (hidden size, vocab) and small MLA ranks.
"""

from __future__ import annotations

import functools
import json
import math
import shutil
from pathlib import Path

from helpers import FIXTURES, engine_args

KIMI_ROPE_THETA = 50000.0
KIMI_YARN = {
    "type": "yarn",
    "factor": 32.0,
    "original_max_position_embeddings": 4096,
    "beta_fast": 1.0,
    "beta_slow": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}


def target_config() -> dict:
    return json.loads((FIXTURES / "deepseek_v3" / "config.json").read_text())


def kimi_mla_drafter_config(**overrides) -> dict:
    t = target_config()
    cfg = {
        "architectures": ["Eagle3DeepseekV2ForCausalLM"],
        "model_type": "kimi_k2",
        "hidden_size": t["hidden_size"],
        "target_hidden_size": t["hidden_size"],
        "intermediate_size": t["intermediate_size"],
        "num_hidden_layers": 1,
        "num_attention_heads": t["num_attention_heads"],
        "num_key_value_heads": t["num_attention_heads"],
        "kv_lora_rank": t["kv_lora_rank"],
        "q_lora_rank": t["q_lora_rank"],
        "qk_nope_head_dim": t["qk_nope_head_dim"],
        "qk_rope_head_dim": t["qk_rope_head_dim"],
        "v_head_dim": t["v_head_dim"],
        "vocab_size": t["vocab_size"],
        "draft_vocab_size": t["vocab_size"],
        "max_position_embeddings": 131072,
        "rope_theta": KIMI_ROPE_THETA,
        "rope_scaling": dict(KIMI_YARN),
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "attention_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": t["bos_token_id"],
        "eos_token_id": t["eos_token_id"],
        "torch_dtype": "float32",
    }
    cfg.update(overrides)
    return cfg


def kimi_k2_llama_drafter_config(**overrides) -> dict:
    """A Llama EAGLE-3 drafter of Kimi-K2 declaring ``model_type: kimi_k2``,
    shaped as SpecForge publishes it (sgl-project/SpecForge
    configs/kimi-k2-eagle3.json: ``LlamaForCausalLMEagle3``, Llama attention
    fields and no MLA ones, ids only in ``eagle_config``, a draft vocab
    through d2t, ``rope_scaling: null``), sized for the tiny target (its
    hidden size and vocab; ids in its 8 layers where Kimi-K2's are
    [2, 30, 58] of 61)."""
    t = target_config()
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": [2, 4, 6],
            "use_aux_hidden_state": True,
        },
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": t["bos_token_id"],
        "eos_token_id": t["eos_token_id"],
        "head_dim": 32,
        "hidden_act": "silu",
        "hidden_size": t["hidden_size"],
        "initializer_range": 0.02,
        "intermediate_size": t["intermediate_size"],
        "max_position_embeddings": 131072,
        "max_window_layers": 48,
        "model_type": "kimi_k2",
        "num_attention_heads": 2,
        "num_hidden_layers": 1,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": t["vocab_size"],
        "draft_vocab_size": t["vocab_size"] // 2,
    }
    cfg.update(overrides)
    return cfg


def write_drafter(out: Path, cfg: dict) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    return str(out)


def draft_model_config(paths, drafter: str):
    """The draft model config vLLM's SpeculativeConfig makes of ``drafter``
    for the tiny DeepSeek-V3 target (its hf_config: EAGLEConfig, the
    checkpoint's fields copied on it, as the drafter model gets it)."""
    from vllm.config import ParallelConfig, SpeculativeConfig

    target = engine_args(paths["deepseek_v3"], load_format="dummy").create_model_config()
    sc = SpeculativeConfig(
        method="eagle3",
        model=drafter,
        num_speculative_tokens=3,
        target_model_config=target,
        target_parallel_config=ParallelConfig(),
    )
    assert sc.draft_model_config is not None
    return sc.draft_model_config


def flag(value) -> bool:
    """A ModelConfig flag: a method up to some releases, a property in others."""
    return bool(value() if callable(value) else value)


# ------------------------------------------- checkpoints for MLA attention

# The CPU MLA decode kernels (csrc/cpu/mla_decode.cpp, AMX_MLA's too) take
# only DeepSeek's own latent sizes, kv_lora_rank 512 + qk_rope_head_dim 64
# (head_dim 576): the checkpoints served with MLA attention have them; the
# rest stays tiny.
MLA_KERNEL = {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 32, "v_head_dim": 32}


def _mla_attention(prefix: str, cfg: dict, input_size: int, gen) -> dict:
    """The weights of one DeepSeek MLA attention block, as checkpoints name them."""
    import torch

    def w(o, i):
        return torch.randn(o, i, generator=gen) / math.sqrt(i)

    heads, q, kv = cfg["num_attention_heads"], cfg["q_lora_rank"], cfg["kv_lora_rank"]
    nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    return {
        prefix + "q_a_proj.weight": w(q, input_size),
        prefix + "q_a_layernorm.weight": torch.ones(q),
        prefix + "q_b_proj.weight": w(heads * (nope + rope), q),
        prefix + "kv_a_proj_with_mqa.weight": w(kv + rope, input_size),
        prefix + "kv_a_layernorm.weight": torch.ones(kv),
        prefix + "kv_b_proj.weight": w(heads * (nope + v), kv),
        prefix + "o_proj.weight": w(cfg["hidden_size"], heads * v),
    }


def write_mla_target(out: Path) -> Path:
    """The tiny DeepSeek-V3 with MLA_KERNEL attention (its other weights and
    its tokenizer are the fixture's; attention drawn anew, seed 3)."""
    import torch
    from safetensors.torch import load_file

    from .doctor_pairs import save

    src = FIXTURES / "deepseek_v3"
    cfg = {**target_config(), **MLA_KERNEL}
    tensors = {k: x for k, x in load_file(str(src / "model.safetensors")).items()}
    gen = torch.Generator().manual_seed(3)
    for i in range(cfg["num_hidden_layers"]):
        prefix = f"model.layers.{i}.self_attn."
        tensors.update(_mla_attention(prefix, cfg, cfg["hidden_size"], gen))
    save(out, cfg, tensors)
    for f in src.iterdir():
        if f.name not in ("config.json", "model.safetensors"):
            shutil.copy(f, out / f.name)
    return out


def write_mla_drafter(out: Path, **overrides) -> Path:
    """A Kimi-shaped MLA drafter (kimi_mla_drafter_config) with MLA_KERNEL
    attention and weights (seed 4), named as TorchSpec writes them: one
    ``midlayer`` whose attention takes [embedding, hidden] (2 x hidden), fc
    over 3 target states, its own norm and lm_head, no embed_tokens (vLLM
    shares the target's), no d2t (draft vocab = vocab)."""
    import torch

    from .doctor_pairs import save

    cfg = kimi_mla_drafter_config(**{**MLA_KERNEL, **overrides})
    hidden, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    gen = torch.Generator().manual_seed(4)

    def w(o, i):
        return torch.randn(o, i, generator=gen) / math.sqrt(i)

    m = "midlayer."
    tensors = _mla_attention(m + "self_attn.", cfg, 2 * hidden, gen)
    tensors.update(
        {
            m + "mlp.gate_proj.weight": w(inter, hidden),
            m + "mlp.up_proj.weight": w(inter, hidden),
            m + "mlp.down_proj.weight": w(hidden, inter),
            m + "input_layernorm.weight": torch.ones(hidden),
            m + "hidden_norm.weight": torch.ones(hidden),
            m + "post_attention_layernorm.weight": torch.ones(hidden),
            "fc.weight": w(hidden, 3 * cfg["target_hidden_size"]),
            "norm.weight": torch.ones(hidden),
            "lm_head.weight": w(vocab, hidden),
        }
    )
    return save(out, cfg, tensors)


# ------------------------------------------- the accepting MLA pair
#
# The accepting pair (fixtures.py, "the accepting pair") with MLA attention in
# target and drafter, so that served MLA drafters accept drafts and the
# accepted counts can be predicted exactly (test_served_mla_drafters.py):
#
# * The target is deepseek_v3_accept with MLA_KERNEL attention whose layers
#   add nothing to the residual stream (every o_proj and down_proj zero: the
#   MLA attention and the MoE still run, their output is dropped): its aux
#   states at every layer are the token's embedding, a word on the circle,
#   and its next token the word after.
# * The drafter is Kimi-shaped (kimi_mla_drafter_config, MLA_KERNEL) and does
#   what eagle3_accept does, with MLA attention: eagle3_accept's fc (the first
#   aux state), o_proj (one step along the circle), lm_head, d2t and norms.
#   Its MLA attention attends to the rows of the same word only: the keys
#   (k_nope, from the latent) and queries (q_nope, from the q latent) are
#   ACCEPT_KEY_PLANES of the circle's planes of the hidden part of its input;
#   the latent holds that part whole, the values of heads 0 and 1 are its two
#   halves (heads 2 and 3: zero). Rows of one word have one value, so the
#   output is that word's whatever the context holds. The rope part of q and
#   k is zero (the reference does not model YaRN's rotation: it adds nothing).

ACCEPT_KEY_PLANES = 16  # 32 dims: a head's qk_nope_head_dim
# the least lead of a row's score on its own word over any other token's, in
# logits at the smallest softmax scale vLLM may use (qk_head_dim**-0.5): any
# other row weighs e^-30 or less
ACCEPT_LEAD = 30.0


def _accept_fixture_layout():
    """(embedding [vocab, hidden] float64, the words (the tokens whose next
    token is another), the number of circle planes): the accepting target's,
    its layout checked (fixtures.py: each word's first 2 * planes dimensions
    are the cosines, then the sines, of its place in each plane)."""
    import torch
    from safetensors.torch import load_file

    nxt = json.loads((FIXTURES / "manifest.json").read_text())["accept_next"]
    words = [t for t, n in enumerate(nxt) if n != t]
    emb = load_file(str(FIXTURES / "deepseek_v3_accept" / "model.safetensors"))
    e = emb["model.embed_tokens.weight"].to(torch.float64)
    planes = (e.shape[1] - 2) // 2
    w = e[words]
    unit = w[:, :planes] ** 2 + w[:, planes : 2 * planes] ** 2
    assert torch.allclose(unit, torch.ones_like(unit), atol=1e-5), "not the circle layout"
    return e, words, planes


def _key_dims(planes: int, chosen) -> list[int]:
    return [*chosen, *(planes + k for k in chosen)]


def _key_scores(e, words, dims):
    """For each word as a query, its score on itself and the largest on any
    other token, with q and k as the drafter makes them (q normed over
    ``dims``, k the dims of the normed hidden state), λ = 1."""
    import torch

    hn = e / e.pow(2).mean(-1, keepdim=True).sqrt()  # hidden_norm, weights one
    k = hn[:, dims]
    q = k[words] / k[words].pow(2).mean(-1, keepdim=True).sqrt()  # q_a_layernorm
    s = q @ k.T
    own = s[torch.arange(len(words)), torch.tensor(words)]
    s[torch.arange(len(words)), torch.tensor(words)] = float("-inf")
    return own, s.max(-1).values


@functools.cache
def accept_key_planes() -> tuple[list[int], float]:
    """The ACCEPT_KEY_PLANES planes (seeded search) whose scores separate a
    word's own rows from any other token's by the largest least lead, and
    that lead (λ = 1)."""
    import torch

    e, words, planes = _accept_fixture_layout()
    gen = torch.Generator().manual_seed(15)
    best: tuple[float, list[int]] | None = None
    for _ in range(100):
        chosen = sorted(torch.randperm(planes, generator=gen)[:ACCEPT_KEY_PLANES].tolist())
        own, other = _key_scores(e, words, _key_dims(planes, chosen))
        lead = float((own - other).min())
        if best is None or lead > best[0]:
            best = (lead, chosen)
    assert best is not None and best[0] > 0, best
    return best[1], best[0]


def write_mla_accept_target(out: Path) -> Path:
    """deepseek_v3_accept with MLA_KERNEL attention (seed 3) and every
    o_proj and down_proj zero (its layers run and add nothing)."""
    import torch
    from safetensors.torch import load_file

    from .doctor_pairs import save

    src = FIXTURES / "deepseek_v3_accept"
    cfg = {**json.loads((src / "config.json").read_text()), **MLA_KERNEL}
    tensors = dict(load_file(str(src / "model.safetensors")))
    gen = torch.Generator().manual_seed(3)
    for i in range(cfg["num_hidden_layers"]):
        tensors.update(_mla_attention(f"model.layers.{i}.self_attn.", cfg, cfg["hidden_size"], gen))
    for k, x in tensors.items():
        if k.endswith(("o_proj.weight", "down_proj.weight")):
            tensors[k] = torch.zeros_like(x)
    save(out, cfg, tensors)
    for f in src.iterdir():
        if f.name not in ("config.json", "model.safetensors"):
            shutil.copy(f, out / f.name)
    return out


def write_mla_accept_drafter(out: Path, **overrides) -> Path:
    """The accepting MLA drafter (above), Kimi-shaped, with eagle3_accept's
    draft vocab (d2t: draft id i is target id 2i)."""
    import torch
    from safetensors.torch import load_file

    from .doctor_pairs import DRAFT_VOCAB, save

    e, _, planes = _accept_fixture_layout()
    chosen, lead = accept_key_planes()
    dims = _key_dims(planes, chosen)
    llama = load_file(str(FIXTURES / "eagle3_accept" / "model.safetensors"))
    cfg = kimi_mla_drafter_config(
        **{**MLA_KERNEL, "q_lora_rank": len(dims), "draft_vocab_size": DRAFT_VOCAB, **overrides}
    )
    hidden, heads, r = cfg["hidden_size"], cfg["num_attention_heads"], cfg["kv_lora_rank"]
    nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    assert nope == len(dims) and heads * vd >= hidden and e.shape[1] == hidden, cfg
    # own row's lead ACCEPT_LEAD logits at the softmax scale without YaRN's mscale
    lam = ACCEPT_LEAD * math.sqrt(nope + rope) / lead
    f64 = torch.float64
    q_a = torch.zeros(len(dims), 2 * hidden, dtype=f64)
    q_b = torch.zeros(heads * (nope + rope), len(dims), dtype=f64)
    kv_a = torch.zeros(r + rope, 2 * hidden, dtype=f64)
    kv_b = torch.zeros(heads * (nope + vd), r, dtype=f64)
    for i, d in enumerate(dims):
        q_a[i, hidden + d] = 1.0  # x = [input_layernorm(embeds) ; hidden_norm(hidden)]
    for i in range(hidden):
        kv_a[i, hidden + i] = 1.0  # the latent: hidden_norm(hidden), then zeros
    for h in range(heads):
        q_b[h * (nope + rope) + torch.arange(nope), torch.arange(nope)] = lam
        kv_b[h * (nope + vd) + torch.arange(nope), torch.tensor(dims)] = 1.0
        lo = h * vd  # values: heads 0, 1 the two halves of the latent's hidden part
        if lo < hidden:
            kv_b[h * (nope + vd) + nope + torch.arange(vd), lo + torch.arange(vd)] = 1.0
    m, a = "midlayer.", "midlayer.self_attn."
    o = torch.zeros(hidden, heads * vd, dtype=f64)
    o[:, :hidden] = llama[a + "o_proj.weight"].to(f64)
    inter = cfg["intermediate_size"]
    tensors = {
        a + "q_a_proj.weight": q_a,
        a + "q_a_layernorm.weight": torch.ones(len(dims), dtype=f64),
        a + "q_b_proj.weight": q_b,
        a + "kv_a_proj_with_mqa.weight": kv_a,
        # the latent (rms over r of a vector of rms 1 over hidden) back to
        # hidden_norm(hidden)
        a + "kv_a_layernorm.weight": torch.full((r,), math.sqrt(hidden / r), dtype=f64),
        a + "kv_b_proj.weight": kv_b,
        a + "o_proj.weight": o,
        # the MLP runs and adds nothing
        m + "mlp.gate_proj.weight": torch.zeros(inter, hidden, dtype=f64),
        m + "mlp.up_proj.weight": torch.zeros(inter, hidden, dtype=f64),
        m + "mlp.down_proj.weight": torch.zeros(hidden, inter, dtype=f64),
    }
    for k in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        tensors[m + k + ".weight"] = llama[m + k + ".weight"]
    for k in ("fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"):
        tensors[k] = llama[k]
    tensors = {k: x.float() if x.is_floating_point() else x for k, x in tensors.items()}
    return save(out, cfg, tensors)


def accept_target_run(target: Path, prompts: list[list[int]], tokens: int, states: int) -> dict:
    """What the accepting MLA target computes, in float64 from its
    checkpoint, in plain_generate.py's shape: each prompt's greedy tokens
    (``tokens`` of them) and its aux states (``states`` of them) at every
    position of the prompt and its tokens but the last. Its layers add
    nothing (checked), so every layer's input is the token's embedding and
    its next token the lm_head's argmax over the normed embedding."""
    import torch
    from safetensors.torch import load_file

    w = load_file(str(target / "model.safetensors"))
    silent = [k for k in w if k.endswith(("o_proj.weight", "down_proj.weight"))]
    assert silent and not any(w[k].any() for k in silent), "the target's layers add something"
    cfg = json.loads((target / "config.json").read_text())
    e = w["model.embed_tokens.weight"].to(torch.float64)
    normed = e * torch.rsqrt(e.pow(2).mean(-1, keepdim=True) + cfg["rms_norm_eps"])
    normed = normed * w["model.norm.weight"].to(torch.float64)
    nxt = (normed @ w["lm_head.weight"].to(torch.float64).T).argmax(-1)
    run: dict = {"prompt_token_ids": [], "tokens": [], "states": []}
    for ids in prompts:
        out = [int(nxt[ids[-1]])]
        while len(out) < tokens:
            out.append(int(nxt[out[-1]]))
        seq = torch.tensor([*ids, *out[:-1]])
        run["prompt_token_ids"].append(list(ids))
        run["tokens"].append(out)
        run["states"].append(torch.cat([e[seq]] * states, dim=-1))
    return run
