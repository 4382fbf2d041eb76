"""The rotary embedding an MLA EAGLE-3 drafter's decoder layer is built with
(``DeepseekV2Eagle3DecoderLayer``, deepseek_eagle3.py, 0.18.0 and later).

MLA attention is built on CPU only from 0.28.0 (before, vLLM's CPU platform
raises "MLA is not supported on CPU"), so the layer is built here with its
attention stubbed: the stub records the config and max_position_embeddings
the layer hands to ``DeepseekV2MLAAttention``, and the rotary embedding is
then made from them by vLLM's own ``get_rope``, the way that attention
makes it (a rope_type other than "default" becomes "deepseek_yarn"). What
only a GPU shows is the acceptance lost to a wrong theta.

* ``rope_theta`` (patch deepseek-eagle3-keep-rope-theta-without-rope-scaling;
  its releases: patches.toml): a drafter without ``rope_scaling``
  keeps its own theta. Unpatched, the layer rebuilds the rope parameters:
  under transformers 4 as ``{"rope_type": "default"}`` (base 10000), under
  transformers 5 as YaRN without a factor (KeyError 'factor' at load).
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import unpatched
from tier_builders.mla_drafters import (
    KIMI_ROPE_THETA,
    draft_model_config,
    kimi_mla_drafter_config,
    write_drafter,
)


class _Built(Exception):
    """Raised by the stub once the attention's arguments are recorded."""


def draft_hf_config(paths, tmp_path, **overrides):
    """The drafter's config as the drafter model gets it."""
    drafter = write_drafter(tmp_path / "d", kimi_mla_drafter_config(**overrides))
    return draft_model_config(paths, drafter).hf_config


def attention_arguments(config, monkeypatch) -> dict:
    """What DeepseekV2Eagle3DecoderLayer hands its MLA attention."""
    from vllm.model_executor.models import deepseek_eagle3

    got: dict = {}

    def stub(**kw):
        got["rope_parameters"] = copy.deepcopy(dict(kw["config"].rope_parameters))
        got["max_position_embeddings"] = kw["max_position_embeddings"]
        raise _Built

    monkeypatch.setattr(deepseek_eagle3, "DeepseekV2MLAAttention", stub)
    vllm_config = SimpleNamespace(
        cache_config=None,
        quant_config=None,
        load_config=None,
        model_config=None,
        speculative_config=SimpleNamespace(draft_model_config=None),
    )
    with pytest.raises(_Built):
        deepseek_eagle3.DeepseekV2Eagle3DecoderLayer(
            vllm_config=vllm_config, prefix="model.layers.0", config=config
        )
    return got


def rotary(args: dict, qk_rope_head_dim: int):
    """The rotary embedding DeepseekV2MLAAttention makes of these arguments."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding import get_rope

    params = dict(args["rope_parameters"])
    if params.get("rope_type", "default") != "default":
        params["rope_type"] = "deepseek_yarn"
    with set_current_vllm_config(VllmConfig()):  # the rotary embedding is a CustomOp
        return get_rope(
            qk_rope_head_dim,
            max_position=args["max_position_embeddings"],
            rope_parameters=params,
            is_neox_style=False,
        )


# the fix's marker: not on 0.15-0.17, whose EAGLE-3 has no MLA drafter (it
# still runs on 0.28+, which carry no rope_theta fix: not a patch effect)
@pytest.mark.rope_theta
def test_mla_drafter_layer_keeps_yarn(paths, tmp_path, monkeypatch):
    """Passes on both installs: a YaRN drafter (the public Kimi drafters')
    gets its theta and YaRN factor."""
    config = draft_hf_config(paths, tmp_path)
    emb = rotary(attention_arguments(config, monkeypatch), config.qk_rope_head_dim)
    assert float(emb.base) == KIMI_ROPE_THETA
    assert float(emb.scaling_factor) == 32.0


@pytest.mark.patch_effect(unpatched.ROPE_THETA_LOST)
@pytest.mark.rope_theta
def test_mla_drafter_layer_keeps_rope_theta_without_rope_scaling(paths, tmp_path, monkeypatch):
    config = draft_hf_config(paths, tmp_path, rope_scaling=None)
    args = attention_arguments(config, monkeypatch)
    emb = rotary(args, config.qk_rope_head_dim)  # unpatched on transformers 5: KeyError
    assert type(emb).__name__ == "RotaryEmbedding", args
    assert float(emb.base) == KIMI_ROPE_THETA, args
