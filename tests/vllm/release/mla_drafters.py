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
