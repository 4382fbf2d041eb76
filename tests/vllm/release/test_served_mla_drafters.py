"""`vpatch doctor`'s verdict on MLA EAGLE-3 drafters against an engine that
serves them with MLA attention: a real `vllm.LLM` with MLA on (the target's
and the drafter's attention are vLLM's MLA layers on the CPU MLA backend), a
Kimi-shaped MLA drafter (``Eagle3DeepseekV2ForCausalLM``, YaRN, draft vocab
= vocab, weights) and EAGLE-3 drafts; what the engine does is read from the
running engine (its drafter model, the attention backend of the drafter's
MLA layers, the draft model config vLLM made, the drafts in its metrics).

* ``kimi_k2`` (the public drafters' model_type): doctor errors exactly where
  the engine's draft model config says non-MLA while the drafter runs MLA
  attention (unpatched: is_deepseek_mla misses kimi_k2);
* ``deepseek_v2`` (what doctor tells kimi_k2 users to declare): doctor passes
  it, and the engine serves it as MLA, patched or not.
Every pair doctor passes is served and drafted with MLA attention.

Runs only in a process of its own with MLA on (VPATCH_VLLM_SERVED,
VLLM_MLA_DISABLE=0; the tier's outer test_doctor_mla_drafters_served, both
installs) on releases whose CPU runner serves EAGLE-3 and builds MLA
attention (releases.MLA_ON_CPU_FROM). The checkpoints have DeepSeek's own
latent sizes (mla_drafters.MLA_KERNEL: the CPU MLA kernels take no other)
and run in bfloat16 (AMX_MLA takes no float32 weights).
"""

from __future__ import annotations

import gc
import json
import os

import pytest
from helpers import engine_kwargs, greedy, in_process, spec_counters
from tier_builders.doctor_pairs import severity, verdict_serve
from tier_builders.mla_drafters import MLA_KERNEL, write_mla_drafter, write_mla_target

pytestmark = pytest.mark.skipif(
    os.environ.get("VLLM_MLA_DISABLE") != "0", reason="needs MLA on (VLLM_MLA_DISABLE=0)"
)

VARIANTS = {"kimi_k2": {}, "deepseek_v2": {"model_type": "deepseek_v2"}}
DRAFT_TOKENS = 2


def _engine_facts(worker) -> dict:
    """Run in the engine's worker: the drafter, its MLA layers' backends, and
    the draft model config vLLM made of it."""
    from vllm.model_executor.layers.attention.mla_attention import MLAAttention

    runner = worker.model_runner
    # the V1 runner's proposer, or the V2 runner's speculator (the only one
    # where V1 is gone): each holds the drafter as .model
    drafter = runner.speculator if hasattr(runner, "speculator") else runner.drafter
    draft = drafter.vllm_config.speculative_config.draft_model_config
    backends = sorted(
        {m.attn_backend.get_name() for m in drafter.model.modules() if isinstance(m, MLAAttention)}
    )
    return {
        "model": type(drafter.model).__name__,
        "mla_backends": backends,
        "use_mla": bool(draft.use_mla),
        "head_size": draft.get_head_size(),
    }


def served(target, drafter) -> dict:
    in_process()  # collective_rpc runs _engine_facts in this process's worker
    from vllm import LLM

    spec = {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": DRAFT_TOKENS}
    kw = engine_kwargs(dtype="bfloat16", disable_log_stats=False)
    llm = LLM(model=str(target), speculative_config=spec, **kw)
    try:
        facts = llm.collective_rpc(_engine_facts)[0]
        out = llm.generate(["w1 w2 w3", "w4 w5"], greedy(6), use_tqdm=False)
        facts["generated"] = [len(o.outputs[0].token_ids) for o in out]
        facts["drafts"] = spec_counters(llm).get("vllm:spec_decode_num_draft_tokens", 0)
        return facts
    finally:
        del llm
        gc.collect()


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_mla_target(tmp_path_factory.mktemp("mla") / "target")


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_doctor_verdict_on_a_served_mla_drafter(name, target, tmp_path):
    drafter = write_mla_drafter(tmp_path / name, **VARIANTS[name])
    facts = served(target, drafter)
    # the engine served the pair, drafting, with MLA attention in the drafter
    assert facts["model"] == "Eagle3DeepseekV2ForCausalLM", facts
    assert facts["mla_backends"], facts
    assert facts["generated"] == [6, 6] and facts["drafts"] > 0, facts
    spec = {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": DRAFT_TOKENS}
    report = verdict_serve(
        "vllm", "serve", str(target), "--max-model-len", "256",
        "--speculative-config", json.dumps(spec),
    )  # fmt: skip
    # vLLM gets the drafter right when its draft config says MLA, as its layers are
    latent = MLA_KERNEL["kv_lora_rank"] + MLA_KERNEL["qk_rope_head_dim"]
    right = facts["use_mla"] and facts["head_size"] == latent
    assert (severity(report, "mla_detection") == "error") == (not right), (
        facts,
        report.to_text(),
    )
    assert report.ok == right, (facts, report.to_text())
