"""The tiny DeepSeek-V3 under vLLM computes what the model is: its greedy
output does not depend on the batch, and a float64 reference of the same
checkpoint (transformers' DeepseekV3ForCausalLM) agrees with it.

Both need the rotary's native path (cpu_rotary.py): vLLM's CPU rotary kernel
reads DeepSeek's 3-D q_pe view with heads taken for tokens, so without it a
prompt's output changes with the prompts batched beside it (0.32.0: one
prompt's first-token logprob -3.276 alone, -3.098 in a batch)."""

from __future__ import annotations

import pytest
import torch
from helpers import PROMPTS

MAX_TOKENS = 12
REFERENCE_TOKENS = 6


def _sampling(max_tokens: int):
    from vllm import SamplingParams

    return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, logprobs=1)


def _run(llm, prompts, max_tokens):
    outs = llm.generate(prompts, _sampling(max_tokens), use_tqdm=False)
    return [
        (
            list(o.prompt_token_ids),
            list(o.outputs[0].token_ids),
            o.outputs[0].logprobs[0][o.outputs[0].token_ids[0]].logprob,
        )
        for o in outs
    ]


@pytest.fixture(scope="module")
def batched(llm):
    return _run(llm, PROMPTS, MAX_TOKENS)


def test_greedy_output_does_not_depend_on_the_batch(llm, batched):
    for prompt, (_, tokens, logprob) in zip(PROMPTS, batched, strict=True):
        [(_, alone, alone_logprob)] = _run(llm, [prompt], MAX_TOKENS)
        assert alone == tokens, f"{prompt!r}: alone {alone}, in a batch {tokens}"
        assert abs(alone_logprob - logprob) < 1e-4, (
            f"{prompt!r}: first-token logprob {alone_logprob:.5f} alone, {logprob:.5f} in a batch"
        )


def _router_weights_in(ref, dtype) -> None:
    """transformers 4's DeepSeek-V3 router computes in float32 and its MoE sums
    the experts into a buffer of the router weights' dtype (index_add_ of
    float64 outputs into float32 fails): hand the MoE the weights in dtype."""
    for module in ref.modules():
        if type(module).__name__ == "DeepseekV3TopkRouter":
            forward = module.forward

            def cast(hidden_states, forward=forward):
                indices, weights = forward(hidden_states)
                return indices, weights.to(dtype)

            module.forward = cast


def test_vllm_agrees_with_a_float64_reference(batched, paths):
    import transformers
    from transformers import AutoModelForCausalLM

    # the grouped-GEMM experts of transformers 5 take no float64: the loop
    # (transformers 4, in the 0.15-0.19 venv, has only the loop and no such
    # argument)
    v5 = int(transformers.__version__.split(".")[0]) >= 5
    more = {"experts_implementation": "eager"} if v5 else {}
    ref = AutoModelForCausalLM.from_pretrained(
        paths["deepseek_v3"], torch_dtype=torch.float64, **more
    )
    assert type(ref).__name__ == "DeepseekV3ForCausalLM", type(ref)
    if not v5:
        _router_weights_in(ref, torch.float64)
    ref.eval()
    for ids, tokens, logprob in batched:
        seq = list(ids)
        with torch.no_grad():
            for step in range(REFERENCE_TOKENS):
                logits = ref(torch.tensor([seq])).logits[0, -1]
                if step == 0:
                    want = torch.log_softmax(logits, -1)[tokens[0]].item()
                    assert abs(want - logprob) < 1e-4, (ids, want, logprob)
                seq.append(int(logits.argmax()))
        got = seq[len(ids) :]
        assert got == tokens[:REFERENCE_TOKENS], f"prompt {ids}: reference {got}, vLLM {tokens}"
