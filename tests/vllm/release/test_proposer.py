"""vLLM's real EagleProposer loading an EAGLE-3 drafter for a Kimi-K2.5 target
takes image_token_index from media_placeholder_token_id
(eagle-alias-kimi-k2-5-media-placeholder-token-id).

The target is the tiny Kimi-K2.5 (dummy weights) built by vLLM's own loader;
the drafter is the tiny Llama EAGLE-3 checkpoint.  Only the config is
assembled by hand when the release refuses eagle3 for this target (the
unpatched case, covered by test_speculative_config.py): the load path under
test is the same either way."""

from __future__ import annotations

import pytest
import torch
import unpatched
from helpers import eagle3_engine_config


@pytest.mark.patch_effect(unpatched.KIMI_NO_IMAGE_TOKEN_INDEX)
def test_eagle3_drafter_for_kimi_k25_gets_media_placeholder_id(llm, kimi_model, paths, manifest):
    from vllm.config import set_current_vllm_config
    from vllm.v1.spec_decode.eagle import EagleProposer

    cfg = eagle3_engine_config(paths["kimi_k25"], paths["eagle3"])
    assert cfg.speculative_config.method == "eagle3"
    with set_current_vllm_config(cfg):
        proposer = EagleProposer(cfg, torch.device("cpu"))
        proposer.load_model(kimi_model)
    assert type(proposer.model).__name__ == "Eagle3LlamaForCausalLM"
    assert proposer.model.config.image_token_index == manifest["media_placeholder_token_id"]
    # the rest of the load path ran: the drafter shares the target's embeddings
    lm = kimi_model.language_model
    decoder = getattr(lm, "model", lm)  # 0.15.x: the bare DeepseekV2Model
    assert proposer.model.model.embed_tokens is decoder.embed_tokens
