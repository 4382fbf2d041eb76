"""SupportsEagle3 on DeepSeek-V2/V3 (deepseek-v2-add-eagle-3-aux-hidden-state-hooks)
and Kimi-K2.5 (kimi-k25-support-eagle-3-via-the-language-model)."""

from __future__ import annotations

import pytest
import torch
import unpatched
from helpers import Capture, check_aux, direct_forward, stand_in_attention


@pytest.mark.patch_effect(unpatched.NOT_EAGLE3)
@pytest.mark.parametrize("name", ["DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"])
def test_deepseek_supports_eagle3(name, model):
    from vllm.model_executor.models import deepseek_v2
    from vllm.model_executor.models.interfaces import supports_eagle3

    cls = getattr(deepseek_v2, name)
    assert supports_eagle3(cls)
    assert supports_eagle3(model)  # the loaded DeepseekV3ForCausalLM


@pytest.mark.patch_effect(unpatched.NOT_EAGLE3)
def test_kimi_k25_supports_eagle3(kimi_model):
    from vllm.model_executor.models.interfaces import supports_eagle3
    from vllm.model_executor.models.kimi_k25 import KimiK25ForConditionalGeneration

    assert supports_eagle3(KimiK25ForConditionalGeneration)
    assert supports_eagle3(kimi_model)


@pytest.mark.patch_effect(unpatched.KIMI_NO_AUX)
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
    # set: the wrapper's forward returns, for each requested layer, exactly the
    # input that reached that layer of the language model (hooks on its
    # decoder layers and final norm take copies), for a prefill-sized and a
    # single-token call alike; the decoder itself returns them too.
    layers = (1, 3, n)
    capture = Capture(kimi_model, decoder)
    try:
        kimi_model.set_aux_hidden_state_layers(layers)
        with stand_in_attention(decoder), capture.active():
            for num_tokens in (5, 1):
                direct_forward(kimi_model, kimi_config, num_tokens=num_tokens)
        assert len(capture.calls) == 2
        for call in capture.calls:
            check_aux(call, layers, n)
            # the layers tell apart (see stand_in_attention), so an aux
            # state of the wrong layer would show
            assert not torch.equal(call["expected"][1], call["expected"][3])
        out_lm = direct_forward(decoder, kimi_config, num_tokens=5)
        assert isinstance(out_lm, tuple) and len(out_lm[1]) == len(layers)
    finally:
        if hasattr(kimi_model, "set_aux_hidden_state_layers"):
            kimi_model.set_aux_hidden_state_layers(())
    assert isinstance(direct_forward(kimi_model, kimi_config), torch.Tensor)


@pytest.mark.patch_effect(unpatched.KIMI_NO_AUX)
def test_kimi_k25_rejects_out_of_range_layers(kimi_model, manifest):
    with pytest.raises(ValueError, match=r"(?i)layer"):
        kimi_model.set_aux_hidden_state_layers((manifest["num_layers"] + 1,))


def test_kimi_k25_builds_and_runs_without_aux(kimi_model, kimi_config, manifest):
    """Passes on both: the Kimi-K2.5 fixture itself is sound."""
    out = direct_forward(kimi_model, kimi_config, num_tokens=3)
    assert isinstance(out, torch.Tensor)
    assert out.shape == (3, manifest["hidden_size"])
    assert kimi_model.config.media_placeholder_token_id == manifest["media_placeholder_token_id"]
