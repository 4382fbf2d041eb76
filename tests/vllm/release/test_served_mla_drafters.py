"""What vLLM's engine does with a Kimi-shaped MLA EAGLE-3 drafter, whatever its
draft model config says about MLA: a real `vllm.LLM` with MLA on (the
target's and the drafter's attention are vLLM's MLA layers on the CPU MLA
backend) serves the accepting MLA pair (mla_drafters.py: the accepting pair's
circle, the drafter ``Eagle3DeepseekV2ForCausalLM`` with YaRN, draft vocab of
the even ids through d2t), the same weights declared as

* ``kimi_k2``, as the public Kimi MLA drafters are: unpatched, vLLM's draft
  model config says ``use_mla=False`` (is_deepseek_mla misses kimi_k2 behind
  the EAGLE wrapper), patched ``True`` (mla-detect-kimi-k2-eagle-drafters);
* ``deepseek_v2``, which vLLM detects as MLA on both installs.

Each must be served losslessly, its drafter's MLA layers running MLA
attention in the generate, and accept exactly what the float64 reference of
the MLA drafter predicts (acceptance.py over eagle3_reference.MlaEagle3Reference,
from the target's tokens and aux states: its layers add nothing, so both
come from its checkpoint, mla_drafters.accept_target_run): vLLM's
spec-decode counters equal its figures. So the counts do not depend on the declared model_type or
on the install (docs/measurements.md, "MLA drafters: accepted drafts"). What
the draft model config said (``use_mla``, head size) is recorded with the
counts, not judged: test_mla_drafter_config.py holds the patch to it.

Runs only in a process of its own with MLA on (VPATCH_VLLM_SERVED,
VLLM_MLA_DISABLE=0; the tier's outer test_served_mla_drafters, both
installs) on releases whose CPU runner serves EAGLE-3 and builds MLA
attention (releases.MLA_ON_CPU_FROM). The checkpoints have DeepSeek's own
latent sizes (mla_drafters.MLA_KERNEL: the CPU MLA kernels take no other)
and run in float32 on CPU_MLA, so that the reference's drafts are vLLM's
(AMX_MLA, which vLLM prefers where the CPU has AMX, takes bfloat16 only:
the tier's machines have none).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest
from helpers import (
    NUM_SPECULATIVE_TOKENS,
    SERVED_MAX_TOKENS,
    SERVED_REFERENCE_TOKENS,
    greedy,
    in_process,
    served_kwargs,
    served_prompts,
    spec_counters,
)
from tier_builders import acceptance
from tier_builders.doctor_pairs import severity, verdict
from tier_builders.eagle3_reference import MlaEagle3Reference
from tier_builders.mla_drafters import (
    accept_target_run,
    draft_model_config,
    flag,
    write_mla_accept_drafter,
    write_mla_accept_target,
)

pytestmark = pytest.mark.skipif(
    os.environ.get("VLLM_MLA_DISABLE") != "0", reason="needs MLA on (VLLM_MLA_DISABLE=0)"
)

VARIANTS = {"kimi_k2": {}, "deepseek_v2": {"model_type": "deepseek_v2"}}


def _engine_facts(worker) -> dict:
    """Run in the engine's worker: the drafter, its MLA layers' backends, the
    draft model config vLLM made of it, the layers the target feeds it."""
    from vllm.model_executor.layers.attention.mla_attention import MLAAttention

    runner = worker.model_runner
    # the V1 runner's proposer, or the V2 runner's speculator (the only one
    # where V1 is gone): each holds the drafter as .model
    drafter = runner.speculator if hasattr(runner, "speculator") else runner.drafter
    draft = drafter.vllm_config.speculative_config.draft_model_config
    backends = sorted(
        {m.attn_backend.get_name() for m in drafter.model.modules() if isinstance(m, MLAAttention)}
    )
    # the V2 runner is a GPUModelRunner of vllm/v1/worker/gpu/ (vLLM's CPU one subclasses it)
    v2 = any(c.__module__ == "vllm.v1.worker.gpu.model_runner" for c in type(runner).__mro__)
    return {
        "runner": "V2" if v2 else "V1",
        "model": type(drafter.model).__name__,
        "mla_backends": backends,
        "use_mla": bool(draft.use_mla),
        "head_size": draft.get_head_size(),
        "aux": sorted(runner.get_model().model.aux_hidden_state_layers),
    }


def _count_mla_calls(worker) -> list[int]:
    """Run in the worker: hooks that count the calls of the drafter's MLA
    attention layers (a list, one entry a call)."""
    from vllm.model_executor.layers.attention.mla_attention import MLAAttention

    runner = worker.model_runner
    drafter = runner.speculator if hasattr(runner, "speculator") else runner.drafter
    calls: list[int] = []
    for m in drafter.model.modules():
        if isinstance(m, MLAAttention):
            m.register_forward_hook(lambda *_: calls.append(1))
    return calls


def served(target: Path, drafter: Path) -> dict:
    """The pair served: the engine's facts, the greedy tokens of the served
    prompts, vLLM's spec-decode counters of the generate and the calls of the
    drafter's MLA layers in it."""
    in_process()  # collective_rpc runs in this process's worker
    from vllm import LLM

    spec = {
        "method": "eagle3",
        "model": str(drafter),
        "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
    }
    kw = served_kwargs(compiled=False)
    llm = LLM(model=str(target), speculative_config=spec, disable_log_stats=False, **kw)
    try:
        facts = llm.collective_rpc(_engine_facts)[0]
        calls = llm.collective_rpc(_count_mla_calls)[0]
        before = spec_counters(llm)
        out = llm.generate(served_prompts("deepseek_v3"), greedy(SERVED_MAX_TOKENS), use_tqdm=False)
        after = spec_counters(llm)
        facts["prompts"] = [list(o.prompt_token_ids) for o in out]
        facts["tokens"] = [list(o.outputs[0].token_ids) for o in out]
        facts["counters"] = {k: after[k] - before.get(k, 0.0) for k in after}
        facts["mla_calls"] = len(calls)
        return facts
    finally:
        del llm
        gc.collect()


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return write_mla_accept_target(tmp_path_factory.mktemp("mla") / "target")


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_served_mla_drafter_accepts_what_the_reference_predicts(
    name, target, tmp_path, record_property
):
    drafter = write_mla_accept_drafter(tmp_path / name, **VARIANTS[name])
    facts = served(target, drafter)
    # the runner and what the draft model config said: recorded with the counts
    record_property("runner", facts["runner"])
    record_property("use_mla", str(facts["use_mla"]))
    record_property("head_size", str(facts["head_size"]))
    # the drafter is the MLA one, its attention an MLA backend, run in the generate
    assert facts["model"] == "Eagle3DeepseekV2ForCausalLM", facts
    assert facts["mla_backends"] and all("MLA" in b for b in facts["mla_backends"]), facts
    assert facts["mla_calls"] > 0, "the drafter's MLA attention did not run in the generate"
    # the target's tokens and aux states, computed from its checkpoint
    run = accept_target_run(target, facts["prompts"], SERVED_REFERENCE_TOKENS, len(facts["aux"]))
    assert facts["tokens"] == [t[:SERVED_MAX_TOKENS] for t in run["tokens"]], (
        "EAGLE-3 changed the greedy output"
    )
    ref = MlaEagle3Reference(drafter, target)
    steps = acceptance.predict_all(ref, run, NUM_SPECULATIVE_TOKENS, SERVED_MAX_TOKENS)
    want = acceptance.counters(steps, NUM_SPECULATIVE_TOKENS)
    k = NUM_SPECULATIVE_TOKENS
    # the pair accepts: some drafts, and some steps every draft (the bonus token)
    assert want[f"{acceptance.PER_POS}[{k - 1}]"] > 0, want
    got = {key: facts["counters"].get(key, 0.0) for key in want}
    assert got == want, f"vLLM's counters of the generate {got}, the reference's {want}"
    per_pos = [int(want[f"{acceptance.PER_POS}[{i}]"]) for i in range(k)]
    record_property(
        "acceptance",
        f"{int(want['vllm:spec_decode_num_accepted_tokens'])} of "
        f"{int(want['vllm:spec_decode_num_draft_tokens'])} draft tokens in "
        f"{int(want['vllm:spec_decode_num_drafts'])} drafts, per position {per_pos}",
    )


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_doctor_on_the_served_pair_is_ok_and_warns_where_the_config_is_not_mla(
    name, target, tmp_path, record_property
):
    """`vpatch doctor` on the pair served above, as a plain serve (no KV
    connector): ok, since vLLM serves it and drafts as the reference says
    whatever the config reports (the test above); mla_detection a warning
    exactly where this install's draft model config says use_mla=False (the
    kimi_k2 declaration, unpatched), never an error."""
    drafter = write_mla_accept_drafter(tmp_path / name, **VARIANTS[name])
    report = verdict(target, drafter)
    assert report.ok, report.to_text()
    is_mla = flag(draft_model_config({"deepseek_v3": str(target)}, str(drafter)).use_mla)
    said = severity(report, "mla_detection")
    record_property("doctor", f"ok, mla_detection {said} (draft config use_mla {is_mla})")
    assert said == ("info" if is_mla else "warning"), report.to_text()
