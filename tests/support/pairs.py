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

# Over 600 lines: one concern, the real-shaped targets and drafters (and the
# serve commands they are published with) that every doctor test shares; a
# shape uses the others' sizes and tensors, so they stay one table.

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


def kimi_k26() -> dict:
    """moonshotai/Kimi-K2.6: Kimi-K2.5's wrapper (KimiK25ForConditionalGeneration,
    model_type kimi_k25) whose text_config says model_type kimi_k2 (its
    config.json; vLLM's recipes/models/moonshotai/Kimi-K2.6.yaml: context
    262144, "DeepSeek-V3 backbone and MLA attention")."""
    cfg = kimi_k25()
    cfg["text_config"]["model_type"] = "kimi_k2"
    return cfg


TARGETS = {
    "kimi_k25": kimi_k25,
    "kimi_k26": kimi_k26,
    "kimi_k2": kimi_k2,
    "deepseek_v3": deepseek_v3,
}

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
TOKENIZERS = {
    "kimi_k25": KIMI_TOKENIZER,
    "kimi_k26": KIMI_TOKENIZER,
    "kimi_k2": KIMI_TOKENIZER,
    "deepseek_v3": DSV3_TOKENIZER,
}
VOCAB = {
    "kimi_k25": KIMI_VOCAB,
    "kimi_k26": KIMI_VOCAB,
    "kimi_k2": KIMI_VOCAB,
    "deepseek_v3": DSV3_VOCAB,
}


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


# -- the published Kimi drafters and serve commands -----------------
#
# The MLA Kimi drafters people serve, each as its maker publishes it:
#
# * lightseekorg/kimi-k2.6-eagle3-mla (and kimi-k2.5-eagle3-mla): TorchSpec's
#   export (hub cards: "an Eagle3 MTP draft model with MLA ... trained with
#   TorchSpec"; k-l-lambda/kimi-k2.6-eagle3-mla, a fine-tune, "config and
#   tensor layout are identical"), vLLM's recipes/models/moonshotai/
#   Kimi-K2.6.yaml recommends it: the TorchSpec shape above;
# * NVIDIA ModelOpt's Kimi-K2.5 EAGLE-3 (nvidia/Kimi-K2.5-Thinking-Eagle3):
#   NVIDIA/Model-Optimizer modelopt/torch/export/plugins/hf_spec_export.py
#   kimik2_eagle_template_config (Eagle3DeepseekV2ForCausalLM, model_type
#   kimi_k2, the base model's MoE and rope keys copied, the ids only in
#   eagle_config, ModelOpt's default [1, n // 2 - 1, n - 4], no top-level ids)
#   and KIMIK2_EAGLE_SINGLE_LAYER (midlayer.* MLA tensors, d2t optional);
# * EAGLE 3.1 MLA (lightseekorg/kimi-k2.7-coder-eagle3.1-mla, vLLM's
#   Kimi-K2.7-Code recipe): the same with fc_norm and norm_output;
# * a truncated vocabulary: draft_vocab_size 32000 with d2t/t2d.
def modelopt_kimi_mla_drafter() -> dict:
    base = kimi_k2()
    keep = (
        "first_k_dense_replace",
        "hidden_act",
        "hidden_size",
        "intermediate_size",
        "kv_lora_rank",
        "max_position_embeddings",
        "moe_intermediate_size",
        "moe_layer_freq",
        "n_group",
        "n_routed_experts",
        "n_shared_experts",
        "norm_topk_prob",
        "num_attention_heads",
        "num_experts_per_tok",
        "num_key_value_heads",
        "num_nextn_predict_layers",
        "q_lora_rank",
        "qk_nope_head_dim",
        "qk_rope_head_dim",
        "rms_norm_eps",
        "routed_scaling_factor",
        "scoring_func",
        "topk_group",
        "topk_method",
        "v_head_dim",
        "vocab_size",
    )
    cfg = {k: base[k] for k in keep}
    cfg.update(
        architectures=["Eagle3DeepseekV2ForCausalLM"],
        model_type="kimi_k2",
        num_hidden_layers=1,
        max_position_embeddings=262144,
        rope_theta=50000.0,
        rope_scaling={**YARN, "factor": 64.0, "beta_fast": 1.0, "beta_slow": 1.0},
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
        draft_vocab_size=KIMI_VOCAB,
        eagle_config={
            "eagle_aux_hidden_state_layer_ids": [1, LAYERS // 2 - 1, LAYERS - 4],
            "use_aux_hidden_state": True,
            "use_input_layernorm_in_first_layer": True,
            "use_last_layernorm": True,
            "use_mtp_layernorm": False,
            "next_layer_regular": True,
            "parallel_draft_step": 1,
            "parallel_draft_heads_num_layers": 1,
        },
    )
    return cfg


def eagle31_kimi_mla_drafter() -> dict:
    return {**torchspec_kimi_mla_drafter(), "fc_norm": True, "norm_output": True}


def truncated_kimi_mla_drafter() -> dict:
    return {**torchspec_kimi_mla_drafter(), "draft_vocab_size": DRAFT_VOCAB}


# The MLA Kimi drafters above by name: {fmt: (config, tensors)} (pair()'s fmt).
def kimi_mla_drafters() -> dict[str, tuple[dict, dict]]:
    return {
        "lightseekorg_mla": (torchspec_kimi_mla_drafter(), mla_tensors(KIMI_VOCAB, KIMI_VOCAB)),
        "modelopt_mla": (modelopt_kimi_mla_drafter(), mla_tensors(KIMI_VOCAB, KIMI_VOCAB)),
        "eagle31_mla": (
            eagle31_kimi_mla_drafter(),
            # deepseek_eagle3.py: fc_norm is a ModuleList, a norm of each aux state
            {
                **mla_tensors(KIMI_VOCAB, KIMI_VOCAB),
                **{f"fc_norm.{i}.weight": ("BF16", [HIDDEN]) for i in range(3)},
            },
        ),
        "truncated_mla": (truncated_kimi_mla_drafter(), mla_tensors(KIMI_VOCAB)),
    }


# sgl-project/SpecForge configs/kimi-k2-eagle3.json: a Llama drafter
# (LlamaForCausalLMEagle3, Llama attention, no MLA keys) that declares
# model_type kimi_k2, ids only in eagle_config, no auto_map.
def specforge_kimi_k2_drafter() -> dict:
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": [2, 30, 58],
            "use_aux_hidden_state": True,
        },
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 163584,
        "eos_token_id": 163585,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": 18432,
        "max_position_embeddings": 131072,
        "max_window_layers": 48,
        "model_type": "kimi_k2",
        "num_attention_heads": 64,
        "num_hidden_layers": 1,
        "num_key_value_heads": 64,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.53.2",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": KIMI_VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
    }


# A public Kimi-K2.6 deployment's command (a runbook of a Kimi-K2.6 server on
# the vllm/vllm-openai image, its "canonical Kimi command", published on GitHub):
# the drafter's speculative max_model_len 8192 under --max-model-len 131072,
# expert parallelism, --language-model-only. KIMI_K26_DP: the same deployment
# at DP 8 (its compose file: --enable-expert-parallel --data-parallel-size=8).
KIMI_K26_DRAFTER = "lightseekorg/kimi-k2.6-eagle3-mla"
KIMI_K26_COMMAND = (
    "vllm serve --model moonshotai/Kimi-K2.6 --served-model-name=kimi-k2.6 --host=0.0.0.0 "
    "--port=8000 --trust-remote-code --enable-expert-parallel --tensor-parallel-size 8 "
    "--gpu-memory-utilization 0.6 --tool-call-parser=kimi_k2 --reasoning-parser=kimi_k2 "
    "--enable-auto-tool-choice --language-model-only --max-num-seqs 32 --max-model-len 131072 "
    '--max-num-batched-tokens 4096 --speculative-config=\'{"model":"lightseekorg/kimi-k2.6-'
    'eagle3-mla","method":"eagle3","num_speculative_tokens":3,"max_model_len":8192}\''
)
KIMI_K26_DP = (
    "vllm serve moonshotai/Kimi-K2.6 --served-model-name=kimi-k2.6 --trust-remote-code "
    "--enable-expert-parallel --data-parallel-size=8 --gpu-memory-utilization 0.75 "
    "--tool-call-parser=kimi_k2 --reasoning-parser=kimi_k2 --enable-auto-tool-choice "
    "--language-model-only --speculative-config "
    '\'{"model":"lightseekorg/kimi-k2.6-eagle3-mla","method":"eagle3","num_speculative_tokens":3}\''
)


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
    if fmt in (mla := kimi_mla_drafters()):
        return mla[fmt]
    if fmt == "specforge_kimi_k2":
        return specforge_kimi_k2_drafter(), llama_tensors(KIMI_VOCAB)
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
