"""An EAGLE-3 drafter whose checkpoint says fewer positions than the served
max_model_len (patch speculative-draft-positions-cover-max-model-len; its
releases: patches.toml).

The proposer hands the drafter the target's positions, up to the target's
max_model_len, and the drafter's rotary embedding caches cos/sin for its own
``max_position_embeddings`` only. Public Kimi drafters say 131072 or less and
Kimi-K2.5 serves 262144: on CUDA the first longer prompt indexes past the
cache (a device-side assert that kills the server, vLLM issue #48894). On CPU
the same gather raises IndexError, so both the decision (the draft config's
``max_position_embeddings``) and its consequence (the drafter vLLM builds
rotating the target's last position) are shown here. What a GPU alone shows:
the device-side assert itself and that it takes the server down.

The drafter is the tiny Llama EAGLE-3 fixture saying 64 positions; the
target serves MAX_MODEL_LEN (256).
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import unpatched
from helpers import MAX_MODEL_LEN, eagle3_engine_config

pytestmark = pytest.mark.draft_positions

SHORT = 64  # the drafter's own max_position_embeddings, below MAX_MODEL_LEN


@pytest.fixture(scope="module")
def short_drafter(paths, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("short") / "eagle3"
    shutil.copytree(paths["eagle3"], out)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["max_position_embeddings"] > SHORT  # the fixture's own, made shorter
    cfg["max_position_embeddings"] = SHORT
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    return str(out)


@pytest.fixture
def config(paths, short_drafter):
    # one per test: building the drafter registers its layers in the config
    return eagle3_engine_config(paths["deepseek_v3"], short_drafter)


@pytest.mark.patch_effect(unpatched.SHORT_DRAFT_POSITIONS)
def test_draft_config_positions_cover_max_model_len(config):
    draft = config.speculative_config.draft_model_config
    assert config.model_config.max_model_len == MAX_MODEL_LEN
    got = draft.hf_config.max_position_embeddings
    assert got >= MAX_MODEL_LEN, (
        f"the drafter's max_position_embeddings is {got}, the target serves {MAX_MODEL_LEN}"
    )


@pytest.mark.patch_effect(unpatched.SHORT_ROTARY_CACHE)
def test_drafter_rotates_the_last_served_position(llm, config):
    """The drafter vLLM builds (get_model with the draft model config, as the
    proposer does) rotates position max_model_len - 1."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model

    draft = config.speculative_config.draft_model_config
    with set_current_vllm_config(config):
        drafter = get_model(vllm_config=config, model_config=draft)
    attn = drafter.model.layers[0].self_attn
    rotary = attn.rotary_emb
    positions = torch.tensor([0, MAX_MODEL_LEN // 2, MAX_MODEL_LEN - 1])
    q = torch.randn(len(positions), attn.num_heads * attn.head_dim)
    k = torch.randn(len(positions), attn.num_kv_heads * attn.head_dim)
    try:
        rotary.forward_native(positions, q, k)
    except IndexError as e:  # CUDA: device-side assert
        pytest.fail(
            f"the drafter's rotary cache has {rotary.cos_sin_cache.shape[0]} positions, "
            f"the target serves {MAX_MODEL_LEN}: {e}"
        )
    assert rotary.cos_sin_cache.shape[0] >= MAX_MODEL_LEN
