"""A target's and a drafter's config.json, read the way vLLM reads them, as
plain data (no transformers, no vLLM).

Target: vLLM takes the text model's sizes from `text_config` when the model
nests one (Kimi-K2.5: `KimiK25ForConditionalGeneration` wrapping a
`deepseek_v3` text model), else from the top level.

Drafter: vLLM reads a drafter in one of two formats
(vllm/transformers_utils/config.py, HFConfigParser.parse):
  * speculators format when config.json has no `model_type` and has
    `speculators_config`; SpeculatorsConfig turns it into a transformers
    config: `transformer_layer_config`, then the eagle3 fields on top
    (see behaviour.effective, which depends on the release);
  * vLLM format otherwise: a plain transformers config (LlamaForCausalLMEagle3,
    Eagle3LlamaForCausalLM, LlamaForCausalLM, ...) that SpeculativeConfig wraps
    in EAGLEConfig.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import jsontext, settings
from ..errors import ConfigError


def load_json(path: Path) -> dict[str, Any]:
    data = jsontext.read(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a JSON object")
    return data


# the most a target's layers may be: no model comes near (DeepSeek-V3 and Kimi have
# 61 layers, the largest public models under 200), and 10**18 layers made doctor
# reason about ids 2, 5 * 10**17 and 10**18 - 3; its other sizes: settings.MOST
MOST_LAYERS = 10_000


def _int(cfg: dict[str, Any], key: str, where: str, most: int = settings.MOST) -> int:
    return settings.whole(cfg.get(key), f"{where}: {key}", 1, most, text=False)


def _optional(cfg: dict[str, Any], key: str, where: str, least: int = 1) -> int | None:
    """An int the config may leave out or give as something else (None:
    doctor does without it), bounded when it is one."""
    v = cfg.get(key)
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    return settings.whole(v, f"{where}: {key}", least, text=False)


# Target families doctor knows vLLM's EAGLE-3 behaviour for: vLLM's
# DeepseekV2ForCausalLM serves all of them (DeepseekV3ForCausalLM is a
# subclass; Kimi-K2 is a DeepseekV3ForCausalLM checkpoint; Kimi-K2.5 wraps one).
DEEPSEEK_ARCHS = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM")
KIMI_K25_ARCH = "KimiK25ForConditionalGeneration"


@dataclass(frozen=True)
class Target:
    path: Path
    architecture: str
    model_type: str  # the outer model's (kimi_k25 for Kimi-K2.5)
    text_model_type: str  # the text model's (deepseek_v3 for Kimi-K2.5)
    num_layers: int
    hidden_size: int
    vocab_size: int
    num_heads: int | None
    media_placeholder_token_id: int | None
    max_position_embeddings: int | None = None  # the text model's: vLLM's default max_model_len
    # remote code the repo names: config.json's auto_map.AutoConfig (a class
    # in a file of the repo), tokenizer_config.json's auto_map.AutoTokenizer
    # and its tokenizer_class; whether vLLM needs them is per release
    # (pair.Pair.remote_code)
    config_class: str | None = None
    tokenizer_auto_map: str | None = None
    tokenizer_class: str | None = None
    # the text model's config as written (Kimi K3's attn_res_block_size)
    text: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def family(self) -> str:
        """kimi_k25, kimi_k2, deepseek_v3, deepseek_v2, or other."""
        if self.architecture == KIMI_K25_ARCH:
            return "kimi_k25"
        if self.architecture in DEEPSEEK_ARCHS:
            if self.model_type.startswith("kimi_k2"):
                return "kimi_k2"
            return "deepseek_v3" if self.architecture.endswith("V3ForCausalLM") else "deepseek_v2"
        return "other"

    def describe(self) -> str:
        names = {
            "kimi_k25": "Kimi-K2.5",
            "kimi_k2": "Kimi-K2",
            "deepseek_v3": "DeepSeek-V3",
            "deepseek_v2": "DeepSeek-V2",
        }
        name = names.get(self.family, self.architecture)
        return (
            f"{name} ({self.architecture}, {self.num_layers} layers, "
            f"hidden {self.hidden_size}, vocab {self.vocab_size})"
        )


def read_target(folder: Path) -> Target:
    cfg = load_json(folder / "config.json")
    where = f"{folder / 'config.json'}"
    archs = cfg.get("architectures") or []
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise ConfigError(f"{where}: no architectures; is this a model folder?")
    text = cfg.get("text_config")
    text = text if isinstance(text, dict) else cfg
    tok = folder / "tokenizer_config.json"
    tok_cfg = load_json(tok) if tok.is_file() else {}
    tok_class = tok_cfg.get("tokenizer_class")
    return Target(
        path=folder,
        architecture=archs[0],
        model_type=str(cfg.get("model_type", "")),
        text_model_type=str(text.get("model_type", cfg.get("model_type", ""))),
        num_layers=_int(text, "num_hidden_layers", where, MOST_LAYERS),
        hidden_size=_int(text, "hidden_size", where),
        vocab_size=_int(text, "vocab_size", where),
        num_heads=_optional(text, "num_attention_heads", where),
        media_placeholder_token_id=_optional(cfg, "media_placeholder_token_id", where, 0),
        max_position_embeddings=_optional(text, "max_position_embeddings", where),
        config_class=_auto_map(cfg, "AutoConfig"),
        tokenizer_auto_map=_auto_map(tok_cfg, "AutoTokenizer"),
        tokenizer_class=tok_class if isinstance(tok_class, str) else None,
        text=text,
    )


def _auto_map(cfg: dict[str, Any], key: str) -> str | None:
    """The class `auto_map[key]` names ("module.Class"; a tokenizer's is a
    [slow, fast] pair, either may be null)."""
    auto = cfg.get("auto_map")
    v = auto.get(key) if isinstance(auto, dict) else None
    if isinstance(v, list):
        v = next((x for x in v if isinstance(x, str)), None)
    return v if isinstance(v, str) else None


@dataclass(frozen=True)
class Drafter:
    """A drafter's config.json as written (`raw`), and which format vLLM
    reads it in. The release-dependent reading (speculators conversion,
    architecture renaming, defaults) is in behaviour.py."""

    path: Path
    raw: dict[str, Any]
    format: str  # "speculators" | "vllm"
    problems: tuple[str, ...] = field(default=())

    @property
    def speculators(self) -> bool:
        return self.format == "speculators"


def read_drafter(folder: Path) -> Drafter:
    raw = load_json(folder / "config.json")
    problems = []
    # HFConfigParser.parse: model_type absent + speculators_config -> "speculators"
    if raw.get("model_type") is None and raw.get("speculators_config") is not None:
        fmt = "speculators"
        layer = raw.get("transformer_layer_config")
        if not isinstance(layer, dict):
            problems.append("speculators config without a transformer_layer_config object")
    else:
        fmt = "vllm"
        if raw.get("speculators_model_type") is not None:
            # vLLM only reads the speculators format when model_type is absent
            problems.append(
                "declares speculators_model_type but also model_type "
                f"{raw.get('model_type')!r}: vLLM reads it as a plain "
                f"{raw.get('model_type')} config and ignores the speculators fields"
            )
    return Drafter(folder, raw, fmt, tuple(problems))
