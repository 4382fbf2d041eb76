"""`vpatch doctor`'s `rope_range` warning against real vLLM: a YaRN EAGLE-3
drafter whose rotary range (original_max_position_embeddings x factor) is
shorter than the served max_model_len.

The drafter is the tiny Llama EAGLE-3 fixture with YaRN rope over 16 x 4 = 64
positions (the public Kimi MLA drafters: 4096 x 32 = 131072 under Kimi-K2.5's
262144), its max_position_embeddings left at the fixture's, which covers
max_model_len. What this vLLM does with it: the drafter it builds (get_model
with the draft model config, as the proposer does) caches cos/sin for the
YaRN range alone; its proposer (EagleProposer, which every release with a
V1 runner builds for EAGLE-3; else the V2 speculator) clamps the positions it
hands the drafter only at the target's max_model_len; and the first
position past the range indexes past the cache (IndexError in the native
rotary here; on CUDA a device error, or a wrong
rotation where the kernel does not check). doctor must warn exactly when the
served max_model_len passes the range, and name the position. The same on
both installs: the series' draft_positions patch raises the drafter's
max_position_embeddings, which a YaRN cache does not read.
"""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest
import torch
from helpers import MAX_MODEL_LEN, eagle3_engine_config
from tier_builders.doctor_pairs import severity, verdict_serve

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
SPAN = 64  # 16 x 4


@pytest.fixture(scope="module")
def yarn_drafter(paths, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("yarn") / "eagle3"
    shutil.copytree(paths["eagle3"], out)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["max_position_embeddings"] >= MAX_MODEL_LEN  # the range is YaRN's alone
    cfg["rope_scaling"] = dict(YARN)
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    return str(out)


def built(config):
    """The drafter's rotary embedding as vLLM builds it, and the bound its
    proposer clamps the drafter's positions at (where the release has no V1
    proposer: the V2 speculator's ``max_model_len``, which its
    decode kernel clamps positions at, ``spec_decode/speculator.py`` and
    ``target_dependent_ar/speculator.py``)."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model

    draft = config.speculative_config.draft_model_config
    with set_current_vllm_config(config):
        drafter = get_model(vllm_config=config, model_config=draft)
        try:
            from vllm.v1.spec_decode.eagle import EagleProposer
        except ModuleNotFoundError:  # the V2 speculator's property, on this config
            from vllm.utils.import_utils import resolve_obj_by_qualname

            spec = config.speculative_config.speculator_config.speculator_class
            speculator = resolve_obj_by_qualname(spec)
            bound = speculator.max_model_len.fget(SimpleNamespace(vllm_config=config))
        else:
            bound = EagleProposer(config, torch.device("cpu")).max_model_len
    return drafter.model.layers[0].self_attn, bound


@pytest.mark.parametrize("max_len", [SPAN, MAX_MODEL_LEN])
def test_doctor_rope_range_verdict_matches_vllm(llm, paths, yarn_drafter, max_len):
    config = eagle3_engine_config(
        paths["deepseek_v3"], yarn_drafter, max_model_len=max_len, max_num_batched_tokens=max_len
    )
    attn, fed = built(config)
    rotary = attn.rotary_emb
    rows = rotary.cos_sin_cache.shape[0]
    assert rows == SPAN  # cos/sin for original x factor, whatever max_position_embeddings says
    assert fed == config.model_config.max_model_len == max_len  # positions up to max_len - 1
    past = fed > rows
    if past:  # the first position past the range: out of the cache
        q = torch.randn(1, attn.num_heads * attn.head_dim)
        k = torch.randn(1, attn.num_kv_heads * attn.head_dim)
        rotary.forward_native(torch.tensor([rows - 1]), q.clone(), k.clone())
        with pytest.raises(IndexError):
            rotary.forward_native(torch.tensor([rows]), q, k)
    spec = json.dumps({"method": "eagle3", "model": yarn_drafter, "num_speculative_tokens": 3})
    report = verdict_serve(
        "vllm", "serve", paths["deepseek_v3"], "--max-model-len", str(max_len),
        "--speculative-config", spec,
    )  # fmt: skip
    found = next(f for f in report.findings if f.check == "rope_range")
    assert (severity(report, "rope_range") == "warning") == past, found.message
    if past:
        assert f"from position {rows} on" in found.message, found.message
