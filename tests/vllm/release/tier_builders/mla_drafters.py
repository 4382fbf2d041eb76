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
