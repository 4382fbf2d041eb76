"""SpeculativeConfig(method="eagle3") accepts DeepSeek-V2, DeepSeek-V3, Kimi-K2
and Kimi-K2.5 targets (speculative-allow-eagle3-for-deepseek-and-kimi-targets);
the unpatched releases raise.

The check matches the target's text config model_type against an allowlist
(an entry admits every model_type it is a substring of), so there is one
target per model_type the patch adds: each entry is needed by one of them
(helpers.TARGETS). Kimi-K2.5's text config says deepseek_v3; no target can
need the kimi_k25 entry, which "kimi_k2" already matches (see the tier's
README, mutants)."""

from __future__ import annotations

import pytest
import unpatched
from helpers import TARGETS, engine_args, target_args


@pytest.mark.patch_effect(unpatched.EAGLE3_REFUSED)
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_eagle3_speculative_config_accepts_target(target, paths):
    from vllm.config import ParallelConfig, SpeculativeConfig

    mc = target_args(paths, target).create_model_config()
    assert mc.hf_text_config.model_type == TARGETS[target]
    sc = SpeculativeConfig(
        method="eagle3",
        model=paths["eagle3"],
        num_speculative_tokens=3,
        target_model_config=mc,
        target_parallel_config=ParallelConfig(),
    )
    assert sc.method == "eagle3"
    assert sc.draft_model_config is not None
    assert any("Eagle3" in a for a in sc.draft_model_config.architectures)


@pytest.mark.patch_effect(unpatched.EAGLE3_REFUSED)
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_eagle3_engine_config_accepts_target(target, paths):
    spec = {"method": "eagle3", "model": paths["eagle3"], "num_speculative_tokens": 3}
    cfg = target_args(paths, target, speculative_config=spec).create_engine_config()
    assert cfg.speculative_config is not None and cfg.speculative_config.method == "eagle3"


def test_other_methods_still_refuse_nothing_new(paths):
    """Passes on both: a plain engine config for the target is unaffected."""
    cfg = engine_args(paths["deepseek_v3"], load_format="dummy").create_engine_config()
    assert cfg.speculative_config is None
    assert cfg.model_config.hf_text_config.model_type == "deepseek_v3"
