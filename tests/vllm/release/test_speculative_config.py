"""SpeculativeConfig(method="eagle3") accepts DeepSeek-V3 and Kimi-K2.5 targets
(patch 0004); the unpatched releases raise."""

from __future__ import annotations

import pytest
from helpers import engine_args


@pytest.mark.patch_effect
@pytest.mark.parametrize("target", ["deepseek_v3", "kimi_k25"])
def test_eagle3_speculative_config_accepts_target(target, paths):
    from vllm.config import ParallelConfig, SpeculativeConfig

    mc = engine_args(paths[target], load_format="dummy").create_model_config()
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


@pytest.mark.patch_effect
@pytest.mark.parametrize("target", ["deepseek_v3", "kimi_k25"])
def test_eagle3_engine_config_accepts_target(target, paths):
    spec = {"method": "eagle3", "model": paths["eagle3"], "num_speculative_tokens": 3}
    cfg = engine_args(
        paths[target], load_format="dummy", speculative_config=spec
    ).create_engine_config()
    assert cfg.speculative_config is not None and cfg.speculative_config.method == "eagle3"


def test_other_methods_still_refuse_nothing_new(paths):
    """Passes on both: a plain engine config for the target is unaffected."""
    cfg = engine_args(paths["deepseek_v3"], load_format="dummy").create_engine_config()
    assert cfg.speculative_config is None
    assert cfg.model_config.hf_text_config.model_type == "deepseek_v3"
