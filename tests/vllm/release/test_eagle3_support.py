"""SupportsEagle3 on DeepSeek-V2/V3 (patch 0001) and Kimi-K2.5 (patch 0002)."""

from __future__ import annotations

import pytest
import torch
from helpers import direct_forward


@pytest.mark.patch_effect
@pytest.mark.parametrize("name", ["DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"])
def test_deepseek_supports_eagle3(name, model):
    from vllm.model_executor.models import deepseek_v2
    from vllm.model_executor.models.interfaces import supports_eagle3

    cls = getattr(deepseek_v2, name)
    assert supports_eagle3(cls)
    assert supports_eagle3(model)  # the loaded DeepseekV3ForCausalLM


@pytest.mark.patch_effect
def test_kimi_k25_supports_eagle3(kimi_model):
    from vllm.model_executor.models.interfaces import supports_eagle3
    from vllm.model_executor.models.kimi_k25 import KimiK25ForConditionalGeneration

    assert supports_eagle3(KimiK25ForConditionalGeneration)
    assert supports_eagle3(kimi_model)


@pytest.mark.patch_effect
def test_kimi_k25_set_get_reach_the_language_model(kimi_model, kimi_config, manifest):
    n = manifest["num_layers"]
    lm = kimi_model.language_model
    # 0.16.0+: a DeepseekV2ForCausalLM; 0.15.x: the bare DeepseekV2Model.
    assert type(lm).__name__ in ("DeepseekV2ForCausalLM", "DeepseekV2Model"), type(lm)
    decoder = getattr(lm, "model", lm)
    assert type(decoder).__name__ == "DeepseekV2Model"
    # get: the wrapper reports the language model's default layers
    assert tuple(kimi_model.get_eagle3_aux_hidden_state_layers()) == (2, n // 2, n - 3)
    if hasattr(lm, "get_eagle3_aux_hidden_state_layers"):
        assert tuple(lm.get_eagle3_aux_hidden_state_layers()) == (2, n // 2, n - 3)
    # set: the wrapper's forward, and the language model's decoder itself,
    # then return the aux hidden states of the requested layers
    try:
        kimi_model.set_aux_hidden_state_layers((1, 3))
        out = direct_forward(kimi_model, kimi_config, num_tokens=5)
        assert isinstance(out, tuple) and len(out) == 2, type(out)
        hidden, aux = out
        assert len(aux) == 2
        assert all(a.shape == hidden.shape == (5, manifest["hidden_size"]) for a in aux)
        out_lm = direct_forward(decoder, kimi_config, num_tokens=5)
        assert isinstance(out_lm, tuple) and len(out_lm[1]) == 2
    finally:
        if hasattr(kimi_model, "set_aux_hidden_state_layers"):
            kimi_model.set_aux_hidden_state_layers(())
    assert isinstance(direct_forward(kimi_model, kimi_config), torch.Tensor)


@pytest.mark.patch_effect
def test_kimi_k25_rejects_out_of_range_layers(kimi_model, manifest):
    with pytest.raises(ValueError, match=r"(?i)layer"):
        kimi_model.set_aux_hidden_state_layers((manifest["num_layers"] + 1,))


def test_kimi_k25_builds_and_runs_without_aux(kimi_model, kimi_config, manifest):
    """Passes on both: the Kimi-K2.5 fixture itself is sound."""
    out = direct_forward(kimi_model, kimi_config, num_tokens=3)
    assert isinstance(out, torch.Tensor)
    assert out.shape == (3, manifest["hidden_size"])
    assert kimi_model.config.media_placeholder_token_id == manifest["media_placeholder_token_id"]
