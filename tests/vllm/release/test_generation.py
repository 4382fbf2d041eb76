"""With no aux layers requested the patched model generates exactly what the
unpatched release generates (greedy, same checkpoint).

The outer runner runs the unpatched variant first with
VPATCH_VLLM_TOKENS_OUT=<file> (this test writes its tokens there) and then the
patched one with VPATCH_VLLM_TOKENS_REF=<that file> (this test compares)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import PROMPTS, greedy

MAX_TOKENS = 24


@pytest.fixture(scope="module")
def generated(llm):
    outs = llm.generate(PROMPTS, greedy(MAX_TOKENS), use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


def test_greedy_generation_is_deterministic(llm, generated):
    again = llm.generate(PROMPTS, greedy(MAX_TOKENS), use_tqdm=False)
    assert [list(o.outputs[0].token_ids) for o in again] == generated
    assert all(len(t) == MAX_TOKENS for t in generated)


def test_greedy_tokens_identical_to_unpatched(generated):
    out = os.environ.get("VPATCH_VLLM_TOKENS_OUT")
    ref = os.environ.get("VPATCH_VLLM_TOKENS_REF")
    if out:
        Path(out).write_text(json.dumps({"prompts": PROMPTS, "tokens": generated}))
    if ref:
        if not Path(ref).is_file():
            pytest.fail(f"the unpatched run left no reference tokens at {ref}")
        want = json.loads(Path(ref).read_text())
        assert want["prompts"] == PROMPTS
        assert generated == want["tokens"], "greedy tokens differ from the unpatched release"
    if not out and not ref:
        pytest.skip("no unpatched reference: set VPATCH_VLLM_TOKENS_REF (the outer runner does)")
