"""Greedy generation of the tiny DeepSeek-V3 is deterministic. Each run writes
its tokens to VPATCH_VLLM_TOKENS_OUT when set; the outer runner
(tests/vllm/test_releases.py) requires the patched release's tokens to equal
the unpatched release's, with no aux layers requested."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers import PROMPTS, greedy

MAX_TOKENS = 24


def _generate(llm) -> list[list[int]]:
    outs = llm.generate(PROMPTS, greedy(MAX_TOKENS), use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


def test_greedy_generation_is_deterministic(llm):
    first = _generate(llm)
    assert _generate(llm) == first
    assert all(len(t) == MAX_TOKENS for t in first)
    out = os.environ.get("VPATCH_VLLM_TOKENS_OUT")
    if out:
        Path(out).write_text(json.dumps({"prompts": PROMPTS, "tokens": first}))
