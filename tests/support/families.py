"""Targets and drafters of the families vLLM serves from its own vllm/models/
packages (DeepSeek-V3.2 and GLM-5, DeepSeek-V4, V4.1, Kimi K3), as their
config.json are published, for doctor's tests: each shape names its source.
Only the keys doctor and vLLM read for these checks are kept; weights are
safetensors headers without data (support.pairs.write_model).

Sources (read through the search tool's public code corpus):
- DeepSeek-V4-Flash (deepseek-ai/DeepSeek-V4-Flash config.json, as copied in
  public test fixtures and NVIDIA NeMo's model-coverage page):
  DeepseekV4ForCausalLM, deepseek_v4, 43 layers, hidden 4096, 64 heads, 1 KV
  head, head_dim 512, hc_mult 4, vocab 129280; -0731 adds the DSpark module
  in the checkpoint: dspark_block_size 5, dspark_target_layer_ids [40, 41, 42].
- DeepSeek-V4.1-Flash (a public engine's notes comparing its fixture with the
  8-GPU real weights): nested text_config, 40 layers, hc_mult 4,
  num_nextn_predict_layers 3, dspark_target_layer_ids [37, 38, 39],
  dspark_block_size 5; vLLM's DeepseekV41Config flattens text_config.
- Kimi K3 (moonshotai/Kimi-K3 config.json, quoted whole in a public model
  report): KimiK3ForConditionalGeneration, kimi_k3, auto_map
  configuration_kimi_k3.KimiK3Config, media_placeholder_token_id 163605, a
  kimi_linear text_config of 93 layers, hidden 7168, 96 heads, vocab 163840,
  attn_res_block_size 12, mla_use_nope and mla_use_output_gate.
- DeepSeek-V3.2-Exp (abridged config.json in public fixtures):
  DeepseekV32ForCausalLM, deepseek_v32, 61 layers, hidden 7168, vocab 129280,
  index_n_heads 64, index_head_dim 128, index_topk 2048, DeepSeek-V3's MLA.
- GLM-5.2 (zai-org/GLM-5.2, pinned geometry in a public harness):
  GlmMoeDsaForCausalLM, glm_moe_dsa, 78 layers, hidden 6144, vocab 154880,
  q_lora_rank 2048.
- AQ-MedAI/DeepSeek-V4-Flash-0731-eagle3 (sgl-project/sglang #33344): an
  SGLang-trained Llama-format EAGLE-3 head of 0.7B for V4-Flash, hidden 4096;
  its config is not in the corpus, so the fixture writes no ids (vLLM feeds
  the target's default then) and a test sets the ids its case needs.
- lightseekorg/kimi-k3-eagle3.1-mla (SGLang's kimi_k3 EAGLE-3 test: "trained
  against one-based completed-layer ids ([2, 46, 90] on the 93-layer target)
  tapping the plain prefix stream"): an MLA EAGLE 3.1 head, fc_norm and
  norm_output.
- RedHatAI/Kimi-K3-speculator.dspark (vLLM's K3 blog command:
  `"method":"dspark","num_speculative_tokens":8`): a speculators-format DSpark
  drafter (speculators_model_type dspark, aux_hidden_state_layer_ids, a qwen3
  transformer_layer_config: the shape of RedHatAI's GLM-5.2 DSpark config,
  which a public engine's fixture copies whole). Its K3 ids are not in the
  corpus: five spread as the GLM-5.2 one's are ([8, 23, 39, 55, 70] of 78).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from vpatch import lock
from vpatch.commands.doctor import Request, preflight
from vpatch.doctor.report import Finding, Report

from support import pairs as F

V4_LAYERS, V4_HIDDEN, V4_VOCAB = 43, 4096, 129280
V41_LAYERS = 40
K3_LAYERS, K3_HIDDEN, K3_VOCAB = 93, 7168, 163840
V32_LAYERS = 61
GLM_LAYERS, GLM_HIDDEN, GLM_VOCAB = 78, 6144, 154880


def deepseek_v4_flash() -> dict:
    return {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "hidden_size": V4_HIDDEN,
        "moe_intermediate_size": 2048,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 6,
        "num_hidden_layers": V4_LAYERS,
        "num_attention_heads": 64,
        "num_key_value_heads": 1,
        "head_dim": 512,
        "q_lora_rank": 1024,
        "o_lora_rank": 1024,
        "qk_rope_head_dim": 64,
        "hc_mult": 4,
        "hc_sinkhorn_iters": 20,
        "num_hash_layers": 3,
        "index_n_heads": 64,
        "index_head_dim": 128,
        "index_topk": 512,
        "sliding_window": 128,
        "max_position_embeddings": 1048576,
        "vocab_size": V4_VOCAB,
        "torch_dtype": "bfloat16",
    }


def deepseek_v4_flash_0731() -> dict:
    """V4-Flash-0731: the DSpark module ships in the checkpoint."""
    return {
        **deepseek_v4_flash(),
        "dspark_block_size": 5,
        "dspark_markov_rank": 256,
        "dspark_target_layer_ids": [40, 41, 42],
        "num_nextn_predict_layers": 1,
    }


def deepseek_v41_flash() -> dict:
    text = {
        **deepseek_v4_flash(),
        "model_type": "deepseek_v41",
        "num_hidden_layers": V41_LAYERS,
        "num_nextn_predict_layers": 3,
        "dspark_block_size": 5,
        "dspark_target_layer_ids": [37, 38, 39],
    }
    del text["architectures"]
    return {
        "architectures": ["DeepseekV41ForCausalLM"],
        "model_type": "deepseek_v41",
        "text_config": text,
        "vision_config": {"hidden_size": 1024, "num_hidden_layers": 24, "patch_size": 14},
        "torch_dtype": "bfloat16",
    }


def kimi_k3(attn_res: int | None = 12) -> dict:
    text = {
        "architectures": ["KimiLinearForCausalLM"],
        "model_type": "kimi_linear",
        "attn_res_block_size": attn_res,
        "first_k_dense_replace": 1,
        "hidden_act": "situ",
        "hidden_size": K3_HIDDEN,
        "intermediate_size": 33792,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "mla_use_nope": True,
        "mla_use_output_gate": True,
        "moe_intermediate_size": 3072,
        "num_attention_heads": 96,
        "num_key_value_heads": 96,
        "num_experts": 896,
        "num_experts_per_token": 16,
        "num_shared_experts": 2,
        "num_hidden_layers": K3_LAYERS,
        "num_nextn_predict_layers": 0,
        "max_position_embeddings": 1048576,
        "vocab_size": K3_VOCAB,
    }
    if attn_res is None:
        del text["attn_res_block_size"]
    return {
        "architectures": ["KimiK3ForConditionalGeneration"],
        "auto_map": {
            "AutoConfig": "configuration_kimi_k3.KimiK3Config",
            "AutoModel": "modeling_kimi_k3.KimiK3ForConditionalGeneration",
            "AutoModelForCausalLM": "modeling_kimi_k3.KimiK3ForConditionalGeneration",
        },
        "media_placeholder_token_id": 163605,
        "model_type": "kimi_k3",
        "pad_token_id": 163839,
        "text_config": text,
        "vision_config": {"patch_size": 14, "vt_hidden_size": 1024, "text_hidden_size": 7168},
        "tie_word_embeddings": False,
    }


def deepseek_v32() -> dict:
    return {
        **F.deepseek_v3_text(),
        "architectures": ["DeepseekV32ForCausalLM"],
        "model_type": "deepseek_v32",
        "index_n_heads": 64,
        "index_head_dim": 128,
        "index_topk": 2048,
    }


def glm_5_2() -> dict:
    return {
        **F.deepseek_v3_text(vocab=GLM_VOCAB, heads=64),
        "architectures": ["GlmMoeDsaForCausalLM"],
        "model_type": "glm_moe_dsa",
        "hidden_size": GLM_HIDDEN,
        "num_hidden_layers": GLM_LAYERS,
        "q_lora_rank": 2048,
        "index_n_heads": 32,
        "index_head_dim": 128,
        "index_topk": 2048,
    }


TARGETS = {
    "deepseek_v32": (deepseek_v32, V32_LAYERS),
    "glm_5_2": (glm_5_2, GLM_LAYERS),
    "deepseek_v4": (deepseek_v4_flash, V4_LAYERS),
    "deepseek_v4_0731": (deepseek_v4_flash_0731, V4_LAYERS),
    "deepseek_v41": (deepseek_v41_flash, V41_LAYERS),
    "kimi_k3": (kimi_k3, K3_LAYERS),
}


def layers(target: str) -> int:
    return TARGETS[target][1]


# ------------------------------------------------------------------ drafters


def llama_eagle3(hidden: int, vocab: int, ids: list[int] | None) -> dict:
    """A Llama-format EAGLE-3 head for a target of `hidden` (SpecForge's export
    shape, as AQ-MedAI's heads ship); `ids` None: it writes none."""
    cfg = F.llama_drafter(vocab)
    cfg.update(hidden_size=hidden, target_hidden_size=hidden)
    cfg.update(num_attention_heads=32, num_key_value_heads=8)
    cfg.pop("eagle_aux_hidden_state_layer_ids")
    if ids is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = list(ids)
    return cfg


def llama_tensors(hidden: int, vocab: int, states: int = 3) -> dict:
    heads, kv, hd, inter, p = 32, 8, 128, 18432, "midlayer."
    return {
        p + "self_attn.q_proj.weight": ("BF16", [heads * hd, 2 * hidden]),
        p + "self_attn.k_proj.weight": ("BF16", [kv * hd, 2 * hidden]),
        p + "self_attn.v_proj.weight": ("BF16", [kv * hd, 2 * hidden]),
        p + "self_attn.o_proj.weight": ("BF16", [hidden, heads * hd]),
        p + "mlp.gate_proj.weight": ("BF16", [inter, hidden]),
        p + "mlp.up_proj.weight": ("BF16", [inter, hidden]),
        p + "mlp.down_proj.weight": ("BF16", [hidden, inter]),
        p + "input_layernorm.weight": ("BF16", [hidden]),
        p + "hidden_norm.weight": ("BF16", [hidden]),
        p + "post_attention_layernorm.weight": ("BF16", [hidden]),
        "fc.weight": ("BF16", [hidden, states * hidden]),
        "norm.weight": ("BF16", [hidden]),
        "lm_head.weight": ("BF16", [F.DRAFT_VOCAB, hidden]),
        "d2t": ("I64", [F.DRAFT_VOCAB]),
        "t2d": ("BOOL", [vocab]),
    }


def aq_medai_v4_eagle3(ids: list[int] | None = None) -> dict:
    """AQ-MedAI/DeepSeek-V4-Flash-0731-eagle3's shape (see the module's
    docstring for its ids)."""
    return llama_eagle3(V4_HIDDEN, V4_VOCAB, ids)


def lightseek_k3_eagle31_mla(ids: list[int] | None = None) -> dict:
    """lightseekorg/kimi-k3-eagle3.1-mla: an MLA EAGLE 3.1 head (the Kimi
    MLA drafters' shape, support.pairs.torchspec_kimi_mla_drafter) with the
    ids SGLang's test pins."""
    cfg = F.torchspec_kimi_mla_drafter()
    cfg.update(
        eagle_aux_hidden_state_layer_ids=list(ids if ids is not None else [2, 46, 90]),
        fc_norm=True,
        norm_output=True,
    )
    return cfg


def redhat_k3_dspark() -> dict:
    """RedHatAI/Kimi-K3-speculator.dspark: the speculators DSpark layout."""
    return {
        "architectures": ["DSparkDraftModel"],
        "speculators_model_type": "dspark",
        "speculators_version": "0.4.0",
        "speculators_config": {
            "algorithm": "dspark",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 8}],
            "verifier": {
                "architectures": ["KimiK3ForConditionalGeneration"],
                "name_or_path": "moonshotai/Kimi-K3",
            },
        },
        "block_size": 8,
        "markov_rank": 256,
        "markov_head_type": "vanilla",
        "mask_token_id": 163838,
        "draft_vocab_size": K3_VOCAB,
        "target_hidden_size": K3_HIDDEN,
        "aux_hidden_state_layer_ids": [2, 24, 47, 70, 90],
        "transformer_layer_config": {
            "model_type": "qwen3",
            "num_hidden_layers": 5,
            "hidden_size": K3_HIDDEN,
            "num_attention_heads": 56,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "intermediate_size": 18432,
            "rms_norm_eps": 1e-05,
            "vocab_size": K3_VOCAB,
        },
    }


def write_target(tmp: Path, name: str, **changes: object) -> Path:
    cfg = copy.deepcopy(TARGETS[name][0]())
    text = cfg.get("text_config")
    for k, v in changes.items():
        (text if isinstance(text, dict) and k in text else cfg)[k] = v
    return F.write_model(tmp / f"target-{name}", cfg)


def write_drafter(tmp: Path, cfg: dict, tensors: dict | None = None, name: str = "drafter") -> Path:
    return F.write_model(tmp / name, cfg, tensors if tensors is not None else {})


def doctor(
    tmp: Path,
    target: str,
    drafter: dict,
    release: str,
    *,
    patched: bool = False,
    platform: str = "",
    method: str = "eagle3",
    tp: int = 8,
    flags: tuple[str, ...] = (),
    assign: tuple[str, ...] = (),
    pins: lock.Lock | None = None,
    target_changes: dict | None = None,
    trust_remote_code: bool = True,
) -> Report:
    """doctor's report for the pair served as `vllm serve TARGET ... --speculative-config`
    on `--vllm RELEASE [--patched] [--platform P]` (commands/doctor.py preflight,
    the CLI's path): `assign` are VAR=value words before the program,
    `flags` more serve flags, `target_changes` keys of the target's config
    (its text_config's where it nests one)."""
    t = write_target(tmp, target, **(target_changes or {}))
    d = write_drafter(tmp, drafter)
    spec = {"method": method, "model": str(d), "num_speculative_tokens": 3}
    words = [*assign, "vllm", "serve", str(t), "-tp", str(tp)]
    words += ["--trust-remote-code"] * trust_remote_code
    words += [*flags, "--max-model-len", "8192", "--speculative-config", json.dumps(spec)]
    req = Request(command=tuple(words), vllm=release, patched=patched, platform=platform)
    return preflight(req, pins=pins or lock.load())


def finding(report: Report, check: str) -> Finding:
    return next(f for f in report.findings if f.check == check)
