"""Real-shaped deployments without weights, for `vpatch doctor`'s tests:
targets (Kimi-K2.5, Kimi-K2, DeepSeek-V3) as their config.json, drafters in
vLLM's Llama EAGLE-3 format, the speculators format and the MLA
(Eagle3DeepseekV2ForCausalLM) format, each with a safetensors file that holds
a valid header and no tensor data at all: reading one byte of data would fail,
which is how the tests show doctor reads headers only.

The numbers are the public configs' (Kimi-K2.5: KimiK25ForConditionalGeneration,
kimi_k25, media_placeholder_token_id 163605, a deepseek_v3 text model with
hidden 7168, 61 layers, vocab 163840; DeepSeek-V3: vocab 129280, 128 heads;
Kimi-K2: kimi_k2 / DeepseekV3ForCausalLM, 64 heads, vocab 163840).
"""

from __future__ import annotations

import copy
import json
import os
import struct
from pathlib import Path

HIDDEN = 7168
LAYERS = 61
KIMI_VOCAB = 163840
DSV3_VOCAB = 129280
DRAFT_VOCAB = 32000
DEFAULT_IDS = [2, LAYERS // 2, LAYERS - 3]  # (2, 30, 58)

REMOTE = {
    "AutoConfig": "configuration_deepseek.DeepseekV3Config",
    "AutoModel": "modeling_deepseek.DeepseekV3Model",
    "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM",
}


def deepseek_v3_text(vocab: int = DSV3_VOCAB, heads: int = 128, experts: int = 256) -> dict:
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "hidden_size": HIDDEN,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "num_hidden_layers": LAYERS,
        "num_nextn_predict_layers": 1,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "n_shared_experts": 1,
        "n_routed_experts": experts,
        "num_experts_per_tok": 8,
        "routed_scaling_factor": 2.5,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "qk_nope_head_dim": 128,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "n_group": 8,
        "topk_group": 4,
        "norm_topk_prob": True,
        "first_k_dense_replace": 3,
        "moe_layer_freq": 1,
        "hidden_act": "silu",
        "max_position_embeddings": 163840,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000,
        "vocab_size": vocab,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def deepseek_v3() -> dict:
    return {**deepseek_v3_text(), "auto_map": REMOTE}


def kimi_k2() -> dict:
    cfg = deepseek_v3_text(vocab=KIMI_VOCAB, heads=64, experts=384)
    cfg.update(model_type="kimi_k2", first_k_dense_replace=1, auto_map=REMOTE, n_group=1)
    return cfg


def kimi_k25() -> dict:
    text = deepseek_v3_text(vocab=KIMI_VOCAB, heads=64, experts=384)
    text.update(first_k_dense_replace=1, n_group=1, topk_group=1, max_position_embeddings=262144)
    return {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "auto_map": {
            "AutoConfig": "configuration_kimi_k25.KimiK25Config",
            "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
        },
        "model_type": "kimi_k25",
        "media_placeholder_token_id": 163605,
        "pad_token_id": 163839,
        "text_config": text,
        "vision_config": {"model_type": "kimi_k25_vision", "hidden_size": 1152, "patch_size": 14},
        "torch_dtype": "bfloat16",
    }


TARGETS = {"kimi_k25": kimi_k25, "kimi_k2": kimi_k2, "deepseek_v3": deepseek_v3}

# tokenizer_config.json as the public repos ship it (the keys that matter):
# Kimi-K2 and Kimi-K2.5 bring their own tiktoken tokenizer as remote code;
# DeepSeek-V3's is transformers' LlamaTokenizerFast.
KIMI_TOKENIZER = {
    "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
    "tokenizer_class": "TikTokenTokenizer",
    "bos_token": "[BOS]",
    "eos_token": "[EOS]",
    "model_max_length": 1000000000000000019884624838656,
}
DSV3_TOKENIZER = {
    "add_bos_token": True,
    "add_eos_token": False,
    "bos_token": "<｜begin▁of▁sentence｜>",
    "eos_token": "<｜end▁of▁sentence｜>",
    "legacy": True,
    "model_max_length": 16384,
    "tokenizer_class": "LlamaTokenizerFast",
}
TOKENIZERS = {"kimi_k25": KIMI_TOKENIZER, "kimi_k2": KIMI_TOKENIZER, "deepseek_v3": DSV3_TOKENIZER}
VOCAB = {"kimi_k25": KIMI_VOCAB, "kimi_k2": KIMI_VOCAB, "deepseek_v3": DSV3_VOCAB}


# ------------------------------------------------------------------ drafters

LLAMA_LAYER = {
    "hidden_act": "silu",
    "hidden_size": HIDDEN,
    "intermediate_size": 18432,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "num_hidden_layers": 1,
    "max_position_embeddings": 262144,
    "rms_norm_eps": 1e-5,
    "rope_theta": 50000.0,
    "tie_word_embeddings": False,
}


def llama_drafter(vocab: int) -> dict:
    """vLLM's Llama EAGLE-3 format (as lightseekorg/kimi-k2.5-eagle3 and the
    SpecForge exports write it)."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        **LLAMA_LAYER,
        "vocab_size": vocab,
        "draft_vocab_size": DRAFT_VOCAB,
        "target_hidden_size": HIDDEN,
        "eagle_aux_hidden_state_layer_ids": list(DEFAULT_IDS),
        "torch_dtype": "bfloat16",
    }


def speculators_drafter(vocab: int, verifier: str) -> dict:
    """The speculators format (`speculators_model_type: eagle3`): no
    model_type, the layer config nested, target_hidden_size null."""
    return {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.3.0",
        "speculators_config": {
            "algorithm": "eagle3",
            "default_proposal_method": "greedy",
            "proposal_methods": [
                {"proposal_type": "greedy", "speculative_tokens": 3, "accept_tolerance": 0.0}
            ],
            "verifier": {"architectures": [], "name_or_path": verifier},
        },
        "transformer_layer_config": {"model_type": "llama", **LLAMA_LAYER, "vocab_size": vocab},
        "draft_vocab_size": DRAFT_VOCAB,
        "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": list(DEFAULT_IDS),
        "torch_dtype": "bfloat16",
    }


def mla_drafter(vocab: int) -> dict:
    """An MLA drafter (Eagle3DeepseekV2ForCausalLM: rules.toml's archs say
    from which release)."""
    return {
        "architectures": ["Eagle3DeepseekV2ForCausalLM"],
        "model_type": "deepseek_v2",
        "hidden_size": HIDDEN,
        "intermediate_size": 18432,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "num_hidden_layers": 1,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "qk_nope_head_dim": 128,
        "hidden_act": "silu",
        "max_position_embeddings": 262144,
        "rms_norm_eps": 1e-6,
        "rope_theta": 50000,
        "rope_scaling": dict(YARN),
        "vocab_size": vocab,
        "draft_vocab_size": DRAFT_VOCAB,
        "target_hidden_size": HIDDEN,
        "eagle_aux_hidden_state_layer_ids": list(DEFAULT_IDS),
        "torch_dtype": "bfloat16",
    }


# The public drafters' shapes (key structure as they ship it):
# SpecForge configs/deepseek-v3-671b-eagle3.json: Llama format, 56 heads, 8 KV
# heads, ids only in eagle_config and written in SGLang's output-of-layer-k
# convention ([1, 29, 57], i.e. vLLM's [2, 30, 58]), no target_hidden_size.
def specforge_dsv3_drafter() -> dict:
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": [1, 29, 57],
            "use_aux_hidden_state": True,
        },
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": 40960,
        "max_position_embeddings": 163840,
        "model_type": "llama",
        "num_attention_heads": 56,
        "num_key_value_heads": 8,
        "num_hidden_layers": 1,
        "pad_token_id": 0,
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
        "use_cache": True,
        "vocab_size": DSV3_VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
    }


# SpecForge configs/kimi-k25-eagle3.json: Llama format, 64 heads, 64 KV heads,
# ids only in eagle_config ([2, 30, 58]: vLLM's convention), 131072 positions
# (Kimi-K2.5's context is 262144), rope_scaling null.
def specforge_kimi_k25_drafter() -> dict:
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "attention_bias": False,
        "draft_vocab_size": DRAFT_VOCAB,
        "dtype": "bfloat16",
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": [2, 30, 58],
            "use_aux_hidden_state": True,
        },
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "intermediate_size": 18432,
        "max_position_embeddings": 131072,
        "model_type": "llama",
        "num_attention_heads": 64,
        "num_hidden_layers": 1,
        "num_key_value_heads": 64,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        "vocab_size": KIMI_VOCAB,
    }


# TorchSpec / lightseekorg Kimi MLA drafters: Eagle3DeepseekV2ForCausalLM with
# model_type kimi_k2, YaRN rope, draft vocab = vocab (so no d2t).
YARN = {
    "type": "yarn",
    "factor": 64.0,
    "original_max_position_embeddings": 4096,
    "beta_fast": 32,
    "beta_slow": 1,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}


def torchspec_kimi_mla_drafter() -> dict:
    cfg = mla_drafter(KIMI_VOCAB)
    cfg.update(model_type="kimi_k2", draft_vocab_size=KIMI_VOCAB, rope_theta=50000.0)
    return cfg


def llama_tensors(vocab: int, prefix: str = "midlayer.", states: int = 3) -> dict:
    h, heads, kv, hd, inter = HIDDEN, 64, 8, 128, 18432
    p = prefix
    return {
        p + "self_attn.q_proj.weight": ("BF16", [heads * hd, 2 * h]),
        p + "self_attn.k_proj.weight": ("BF16", [kv * hd, 2 * h]),
        p + "self_attn.v_proj.weight": ("BF16", [kv * hd, 2 * h]),
        p + "self_attn.o_proj.weight": ("BF16", [h, heads * hd]),
        p + "mlp.gate_proj.weight": ("BF16", [inter, h]),
        p + "mlp.up_proj.weight": ("BF16", [inter, h]),
        p + "mlp.down_proj.weight": ("BF16", [h, inter]),
        p + "input_layernorm.weight": ("BF16", [h]),
        p + "hidden_norm.weight": ("BF16", [h]),
        p + "post_attention_layernorm.weight": ("BF16", [h]),
        "fc.weight": ("BF16", [h, states * h]),
        "norm.weight": ("BF16", [h]),
        "lm_head.weight": ("BF16", [DRAFT_VOCAB, h]),
        "d2t": ("I64", [DRAFT_VOCAB]),
        "t2d": ("BOOL", [vocab]),
    }


def mla_tensors(vocab: int, draft_vocab: int = DRAFT_VOCAB) -> dict:
    h, p = HIDDEN, "midlayer."
    return {
        p + "self_attn.q_a_proj.weight": ("BF16", [1536, 2 * h]),
        p + "self_attn.q_a_layernorm.weight": ("BF16", [1536]),
        p + "self_attn.q_b_proj.weight": ("BF16", [64 * 192, 1536]),
        p + "self_attn.kv_a_proj_with_mqa.weight": ("BF16", [576, 2 * h]),
        p + "self_attn.kv_a_layernorm.weight": ("BF16", [512]),
        p + "self_attn.kv_b_proj.weight": ("BF16", [64 * 256, 512]),
        p + "self_attn.o_proj.weight": ("BF16", [h, 64 * 128]),
        p + "mlp.gate_proj.weight": ("BF16", [18432, h]),
        p + "mlp.up_proj.weight": ("BF16", [18432, h]),
        p + "mlp.down_proj.weight": ("BF16", [h, 18432]),
        p + "input_layernorm.weight": ("BF16", [h]),
        p + "hidden_norm.weight": ("BF16", [h]),
        p + "post_attention_layernorm.weight": ("BF16", [h]),
        "fc.weight": ("BF16", [h, 3 * h]),
        "norm.weight": ("BF16", [h]),
        "lm_head.weight": ("BF16", [draft_vocab, h]),
        **(
            {"d2t": ("I64", [draft_vocab]), "t2d": ("BOOL", [vocab])} if draft_vocab < vocab else {}
        ),
    }


SIZES = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8, "BOOL": 1}


def write_header_only(path: Path, tensors: dict, sparse: bool = False) -> int:
    """A safetensors file with a valid header and no data: the offsets are
    those of the real file, the bytes after the header are absent, or, with
    `sparse`, there as a sparse file (its full size on no disk). Its size."""
    meta: dict = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, (dtype, shape) in sorted(tensors.items()):
        n = SIZES[dtype]
        for d in shape:
            n *= d
        meta[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(meta, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    size = 8 + len(raw) + (off if sparse else 0)
    if sparse:
        os.truncate(path, size)
    return size


def write_model(
    folder: Path, config: dict, tensors: dict | None = None, sparse: bool = False, shards: int = 1
) -> Path:
    """config.json, and the tensors as model.safetensors, or as `shards`
    files with model.safetensors.index.json."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    if tensors is None:
        return folder
    if shards == 1:
        write_header_only(folder / "model.safetensors", tensors, sparse)
        return folder
    names = sorted(tensors)
    weight_map, total = {}, 0
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[i::shards]}
        total += write_header_only(folder / file, part, sparse)
        weight_map.update(dict.fromkeys(part, file))
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    return folder


def drafter_for(target: str, fmt: str) -> tuple[dict, dict]:
    vocab = VOCAB[target]
    if fmt == "vllm":
        return llama_drafter(vocab), llama_tensors(vocab)
    if fmt == "speculators":
        name = {"kimi_k25": "moonshotai/Kimi-K2.5", "kimi_k2": "moonshotai/Kimi-K2-Instruct"}
        verifier = name.get(target, "deepseek-ai/DeepSeek-V3")
        return speculators_drafter(vocab, verifier), llama_tensors(vocab, prefix="layers.0.")
    if fmt == "mla":
        return mla_drafter(vocab), mla_tensors(vocab)
    if fmt == "specforge_dsv3":
        return specforge_dsv3_drafter(), llama_tensors(DSV3_VOCAB)
    if fmt == "specforge_kimi":
        return specforge_kimi_k25_drafter(), llama_tensors(KIMI_VOCAB)
    if fmt == "torchspec_mla":
        return torchspec_kimi_mla_drafter(), mla_tensors(KIMI_VOCAB, KIMI_VOCAB)
    raise ValueError(fmt)


def pair(
    tmp: Path,
    target: str = "kimi_k25",
    fmt: str = "vllm",
    config: dict | None = None,
    drop: tuple[str, ...] = (),
    tensors: dict | None = None,
    delete: tuple[str, ...] = (),
    sparse: bool = False,
    shards: int = 1,
) -> tuple[Path, Path]:
    """(target folder, drafter folder). `config` sets drafter config keys,
    `delete` removes them, `drop` removes tensors, `tensors` adds or replaces
    them ({name: (dtype, shape)}); the checkpoint's data is absent, or a
    sparse file (`sparse`), in `shards` files."""
    t = write_model(tmp / target, TARGETS[target]())
    (t / "tokenizer_config.json").write_text(json.dumps(TOKENIZERS[target], indent=1))
    cfg, ten = drafter_for(target, fmt)
    cfg = copy.deepcopy(cfg)
    cfg.update(config or {})
    for k in delete:
        cfg.pop(k, None)
    ten = {k: v for k, v in ten.items() if k not in drop}
    ten.update(tensors or {})
    d = write_model(tmp / f"drafter-{fmt}", cfg, ten, sparse, shards)
    return t, d
