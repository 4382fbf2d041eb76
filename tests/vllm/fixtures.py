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
    DIR/kimi_k25/      KimiK25ForConditionalGeneration, servable: the deepseek_v3 text model
                       (the same weights, under language_model.) + a tiny MoonViT vision
                       tower and projector (seed 2), media_placeholder_token_id, the same
                       tokenizer, and its media processor as the real checkpoint has it:
                       preprocessor_config.json's media_proc_cfg (read by vLLM's own
                       processor from 0.26) and a remote-code module (0.15-0.17 load it
                       with trust_remote_code=True whatever the engine says)
    DIR/deepseek_v2/   DeepseekV2ForCausalLM config (model_type deepseek_v2, greedy softmax
                       routing, no q_lora, as DeepSeek-V2-Lite); no weights, same tokenizer
    DIR/kimi_k2/       Kimi-K2's config: DeepseekV3ForCausalLM with model_type kimi_k2,
                       which transformers does not know: like the real one it names its
                       config class in auto_map (remote code, a file in the folder); no
                       weights, same tokenizer
    DIR/manifest.json  the numbers the tests need (layers, vocab, placeholder id)

Nothing is downloaded; the tier (vllm_tier.models) caches DIR by the hash of
this file.
"""

from __future__ import annotations

import argparse
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


def deepseek_v3_weights(gen) -> dict:
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
            t[x + "gate_proj.weight"] = w(MOE_INTERMEDIATE, HIDDEN)
            t[x + "up_proj.weight"] = w(MOE_INTERMEDIATE, HIDDEN)
            t[x + "down_proj.weight"] = w(HIDDEN, MOE_INTERMEDIATE)
        s = m + "shared_experts."
        t[s + "gate_proj.weight"] = w(MOE_INTERMEDIATE * N_SHARED, HIDDEN)
        t[s + "up_proj.weight"] = w(MOE_INTERMEDIATE * N_SHARED, HIDDEN)
        t[s + "down_proj.weight"] = w(HIDDEN, MOE_INTERMEDIATE * N_SHARED)
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
# cannot serve stay doctor variants (release/doctor_pairs.py).
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


def eagle3_weights(gen) -> dict:
    import torch

    def w(out_f, in_f):
        return torch.randn(out_f, in_f, generator=gen) / math.sqrt(in_f)

    q = EAGLE_HEADS * EAGLE_HEAD_DIM
    kv = EAGLE_KV_HEADS * EAGLE_HEAD_DIM
    m = "midlayer."
    return {
        # layer 0 attends over [embeds ; hidden] (2 x hidden)
        m + "self_attn.q_proj.weight": w(q, 2 * HIDDEN),
        m + "self_attn.k_proj.weight": w(kv, 2 * HIDDEN),
        m + "self_attn.v_proj.weight": w(kv, 2 * HIDDEN),
        m + "self_attn.o_proj.weight": w(HIDDEN, q),
        m + "mlp.gate_proj.weight": w(INTERMEDIATE, HIDDEN),
        m + "mlp.up_proj.weight": w(INTERMEDIATE, HIDDEN),
        m + "mlp.down_proj.weight": w(HIDDEN, INTERMEDIATE),
        m + "input_layernorm.weight": torch.ones(HIDDEN),
        m + "hidden_norm.weight": torch.ones(HIDDEN),
        m + "post_attention_layernorm.weight": torch.ones(HIDDEN),
        "fc.weight": w(HIDDEN, 3 * HIDDEN),
        "norm.weight": torch.ones(HIDDEN),
        "lm_head.weight": w(DRAFT_VOCAB, HIDDEN),
        # draft id i -> target id i + d2t[i] = 2i; t2d marks the target ids drafted
        "d2t": torch.arange(DRAFT_VOCAB, dtype=torch.long),
        "t2d": torch.arange(VOCAB) % 2 == 0,
    }


def eagle3_layer0_config() -> dict:
    c = eagle3_config()
    c["eagle_aux_hidden_state_layer_ids"] = EAGLE3_LAYER0_IDS
    c["eagle_config"] = {
        "eagle_aux_hidden_state_layer_ids": EAGLE3_LAYER0_IDS,
        "use_aux_hidden_state": True,
    }
    return c


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
    text = deepseek_v3_config()
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
    text model's (deepseek_v3_weights, seed 0) under language_model., the
    vision tower's and the projector's (``gen``)."""
    import torch

    def w(out_f, in_f):
        return torch.randn(out_f, in_f, generator=gen) / math.sqrt(in_f)

    def small(n):
        return torch.randn(n, generator=gen) * 0.02

    text = deepseek_v3_weights(torch.Generator().manual_seed(0))
    t = {f"language_model.{k}": v for k, v in text.items()}
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
            "deepseek_v2": "deepseek_v2",
            "kimi_k2": "kimi_k2",
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
