"""What the MLA EAGLE-3 drafter's fc gets when the drafter has ``fc_norm``
(patch deepseek-eagle3-apply-fc-norm; its releases: patches.toml).

EAGLE-3.1 drafters norm each target state before fc: ``fc_norm`` is one
RMSNorm per aux state. From 0.22.0 ``DeepseekV2Eagle3Model`` builds those
norms and loads their weights, but in 0.22.x
``Eagle3DeepseekV2ForCausalLM.combine_hidden_states`` hands fc the states as
they are. MLA attention cannot be built on CPU before 0.28.0, so the
drafter's own combine_hidden_states runs here on a stand-in for its model
holding what it reads: vLLM's RMSNorm per aux state (as the drafter builds
them), and an fc that records its input. That input must be each state's
chunk normed by its own norm, against a float64 reference. What only a GPU
shows is the acceptance lost to unnormed states.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import unpatched

pytestmark = [pytest.mark.patch_effect(unpatched.FC_NORM_SKIPPED), pytest.mark.mla_fc_norm]

HIDDEN, AUX, TOKENS, EPS = 64, 3, 5, 1e-6


def _reference(states: torch.Tensor, weights: list[torch.Tensor]) -> torch.Tensor:
    out = []
    for chunk, w in zip(states.double().chunk(AUX, dim=-1), weights, strict=True):
        rms = torch.rsqrt(chunk.pow(2).mean(-1, keepdim=True) + EPS)
        out.append(chunk * rms * w.double())
    return torch.cat(out, dim=-1)


def combine(states: torch.Tensor, weights: list[torch.Tensor] | None = None) -> torch.Tensor:
    """What the drafter's fc gets from its combine_hidden_states, with vLLM's
    RMSNorm per aux state (of these weights, else ones) as fc_norm."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.layernorm import RMSNorm
    from vllm.model_executor.models.deepseek_eagle3 import Eagle3DeepseekV2ForCausalLM

    with set_current_vllm_config(VllmConfig()):  # RMSNorm is a CustomOp
        norms = torch.nn.ModuleList([RMSNorm(HIDDEN, eps=EPS) for _ in range(AUX)])
    with torch.no_grad():
        for norm, w in zip(norms, weights or [torch.ones(HIDDEN)] * AUX, strict=True):
            norm.weight.copy_(w)
    got = {}

    def fc(x):
        got["input"] = x.clone()
        return x

    drafter = SimpleNamespace(
        model=SimpleNamespace(num_aux_hidden_states=AUX, fc_norm=norms, fc=fc)
    )
    with torch.no_grad():
        Eagle3DeepseekV2ForCausalLM.combine_hidden_states(drafter, states)
    return got["input"]


def test_mla_drafter_fc_gets_each_aux_state_normed():
    gen = torch.Generator().manual_seed(5)
    weights = [1.0 + torch.rand(HIDDEN, generator=gen) for _ in range(AUX)]
    # states of very different scales, as the target's layers give them
    states = torch.cat(
        [torch.randn(TOKENS, HIDDEN, generator=gen) * s for s in (0.1, 3.0, 40.0)], dim=-1
    )
    got = combine(states, weights)
    want = _reference(states, weights)
    normed = bool(torch.allclose(got.double(), want, rtol=1e-4, atol=1e-5))
    unnormed = bool(torch.equal(got, states))
    why = "fc got the aux states without fc_norm" if unnormed else "fc_norm applied wrongly"
    assert normed, why
