"""What vLLM's config makes of an MLA EAGLE-3 drafter (mla_drafters.py) for the
tiny DeepSeek-V3 target: the draft model config SpeculativeConfig builds.

* ``mla_detect`` (patch mla-detect-kimi-k2-eagle-drafters, 0.18.0 and
  later): a drafter whose config says ``model_type: kimi_k2``, as the public
  Kimi MLA drafters do, is MLA (``is_deepseek_mla``), as the same drafter
  saying ``deepseek_v3`` is; a Llama drafter saying ``kimi_k2``, as
  SpecForge's Kimi-K2 drafter does, is not, though its config loads as
  kimi_k2's DeepseekV3Config with a default kv_lora_rank (a fix keyed on
  the model_type calls it MLA). Unpatched, SpeculativeConfig's EAGLEConfig
  wrapper hides the MLA drafter behind model_type "eagle", whose branch of
  is_deepseek_mla does not list kimi_k2. The premise: the same drafter
  saying ``deepseek_v2`` is MLA on both installs (``deepseek_v3`` would not
  do: SpeculativeConfig makes that a DeepSeek MTP draft).
"""

from __future__ import annotations

import pytest
import unpatched
from tier_builders.mla_drafters import (
    draft_model_config,
    flag,
    kimi_k2_llama_drafter_config,
    kimi_mla_drafter_config,
    write_drafter,
)


# the fix's marker: it runs where MLA EAGLE-3 drafters exist (0.18+, the
# releases whose series carry the fix), not on 0.15-0.17
@pytest.mark.mla_detect
def test_mla_drafter_saying_deepseek_v2_is_mla(paths, tmp_path):
    """Passes on both installs: the premise of the patch-effect test below."""
    drafter = write_drafter(tmp_path / "d", kimi_mla_drafter_config(model_type="deepseek_v2"))
    dmc = draft_model_config(paths, drafter)
    assert dmc.hf_config.model_type == "eagle"
    assert dmc.hf_config.model.model_type == "deepseek_v2"
    assert flag(dmc.is_deepseek_mla)


@pytest.mark.patch_effect(unpatched.MLA_NOT_DETECTED)
@pytest.mark.mla_detect
def test_kimi_k2_drafter_is_mla_exactly_when_its_class_is(paths, tmp_path):
    """The Llama drafter saying kimi_k2 is not MLA (checked first: it passes
    unpatched), the MLA one is."""
    llama = draft_model_config(
        paths, write_drafter(tmp_path / "llama", kimi_k2_llama_drafter_config())
    )
    assert llama.hf_config.model_type == "eagle"
    assert llama.hf_config.model.model_type == "kimi_k2"
    # as vLLM loads it: kimi_k2's config class, kv_lora_rank its default
    assert getattr(llama.hf_config.model, "kv_lora_rank", None) is not None
    assert not flag(llama.is_deepseek_mla), "the Llama drafter saying kimi_k2 is taken for MLA"
    drafter = write_drafter(tmp_path / "d", kimi_mla_drafter_config())
    dmc = draft_model_config(paths, drafter)
    assert dmc.hf_config.model_type == "eagle"
    assert dmc.hf_config.model.model_type == "kimi_k2"
    assert flag(dmc.is_deepseek_mla), "the kimi_k2 MLA drafter is not detected as MLA"
