"""EAGLE-3 aux hidden states of DeepSeek-V3
(deepseek-v2-add-eagle-3-aux-hidden-state-hooks), checked against values
captured independently by hooks during a real generate step."""

from __future__ import annotations

import pytest
import torch
import unpatched
from helpers import PROMPTS, Capture, check_aux, direct_forward, greedy

# Every test here also runs under the CUDA contract ([cuda]): aux states are
# read after the whole forward, after the in-place writes the GPU would make.
pytestmark = [pytest.mark.usefixtures("aux_reset"), pytest.mark.kernels]


def _run_with_aux(llm, model, capture: Capture, layers):
    """One real generate with aux layers set. Two prompts, one stopping after
    2 tokens and one after 4: the steps are a prefill of both, a decode of 2
    tokens, then decodes of a single token. An aux state wrong only for some
    batch shapes (a decode of one token, or many tokens) shows in one of them."""
    model.set_aux_hidden_state_layers(tuple(layers))
    with capture.active():
        llm.generate(PROMPTS[:2], [greedy(2), greedy(4)], use_tqdm=False)
    assert capture.calls, "the model's forward was never called"
    sizes = sorted({call["expected"][0].shape[0] for call in capture.calls})
    assert sizes[0] == 1 and len(sizes) >= 3, f"tokens per forward call: {sizes}"
    return capture.calls


@pytest.mark.patch_effect(unpatched.DEEPSEEK_NO_AUX)
def test_default_aux_layers(llm, model, capture, manifest):
    n = manifest["num_layers"]
    layers = model.get_eagle3_aux_hidden_state_layers()
    assert tuple(layers) == (2, n // 2, n - 3) == tuple(manifest["default_aux_layers"])
    for call in _run_with_aux(llm, model, capture, layers):
        check_aux(call, layers, n)


@pytest.mark.patch_effect(unpatched.LAYER0_AUX)
@pytest.mark.layer0_fix
def test_explicit_aux_layers_with_layer_0(llm, model, capture, manifest):
    n = manifest["num_layers"]
    layers = (0, 1, n - 1)
    calls = _run_with_aux(llm, model, capture, layers)
    for call in calls:
        check_aux(call, layers, n)
        # layer 0: just the embeddings (no residual yet)
        assert torch.equal(call["out"][1][0], call["expected"][0])


@pytest.mark.patch_effect(unpatched.LAYER0_AUX)
@pytest.mark.layer0_fix
def test_layer_0_alone_is_the_embedding(llm, model, capture):
    """Layer 0 on the first rank has no residual yet: its aux hidden state is
    the embedding itself (vLLM 0.18-0.33 add None to it and crash).

    Checked during a real generate step, AFTER the whole forward, against a
    copy of the embedding taken when it was made: under the CUDA contract an
    aux state that aliases the embedding (which vLLM >= 0.25 uses as layer 0's
    residual) has been overwritten by then with embedding + attention output."""
    embeddings = []
    hook = model.model.embed_tokens.register_forward_hook(
        lambda module, args, out: embeddings.append(out.detach().clone())
    )
    try:
        calls = _run_with_aux(llm, model, capture, (0,))
    finally:
        hook.remove()
    assert len(embeddings) == len(calls), (len(embeddings), len(calls))
    for call, embedding in zip(calls, embeddings, strict=True):
        out = call["out"]
        assert isinstance(out, tuple), f"forward returned {type(out).__name__}, expected a tuple"
        _, aux = out
        assert len(aux) == 1 and aux[0].shape == embedding.shape
        assert torch.equal(aux[0], embedding), (
            "layer 0's aux hidden state is not the embedding after the forward: "
            f"max |diff| = {(aux[0] - embedding).abs().max().item()}"
        )


@pytest.mark.patch_effect(unpatched.DEEPSEEK_NO_AUX)
def test_final_index_is_pre_norm_output(llm, model, capture, manifest):
    n = manifest["num_layers"]
    layers = (3, n)
    for call in _run_with_aux(llm, model, capture, layers):
        check_aux(call, layers, n)


@pytest.mark.patch_effect(unpatched.FINAL_NORM_ID_DROPPED)
@pytest.mark.final_norm_id
def test_final_norm_input_is_collected_after_the_last_layer(llm, model, capture, manifest):
    """0.18.0-0.24.0 (patch deepseek-v2-collect-the-eagle-3-aux-state-before-
    the-final-norm, vLLM PR #46973 backported): a drafter asking for
    (2, n // 2, n) gets the final norm's input as its third state. Unpatched,
    DeepseekV2Model.forward matches id n to none of its layers and returns
    two states, and the drafter's fc, built for three, fails."""
    n = manifest["num_layers"]
    layers = (2, n // 2, n)
    for call in _run_with_aux(llm, model, capture, layers):
        check_aux(call, layers, n)


@pytest.mark.patch_effect(unpatched.DEEPSEEK_NO_AUX)
def test_clearing_aux_layers_gives_a_plain_tensor_again(llm, model, capture):
    model.set_aux_hidden_state_layers((1, 2, 3))
    model.set_aux_hidden_state_layers(())
    with capture.active():
        llm.generate(PROMPTS[:1], greedy(2), use_tqdm=False)
    assert capture.calls
    for call in capture.calls:
        assert isinstance(call["out"], torch.Tensor)


def test_no_aux_layers_forward_returns_plain_tensor(llm, model, capture):
    """Passes on both: with no aux layers requested forward is unchanged."""
    with capture.active():
        llm.generate(PROMPTS, greedy(3), use_tqdm=False)
    assert capture.calls
    for call in capture.calls:
        assert isinstance(call["out"], torch.Tensor), type(call["out"])
        assert torch.equal(call["out"], call["norm_out"])


@pytest.mark.patch_effect(unpatched.DEEPSEEK_NO_AUX)
@pytest.mark.parametrize("bad", [(9,), (-1,), (2, 100)], ids=["n+1", "negative", "far"])
def test_out_of_range_aux_layers_raise(model, vllm_config, manifest, bad):
    n = manifest["num_layers"]
    bad = tuple(n + 1 if b == 9 else b for b in bad)
    with pytest.raises(ValueError, match=r"(?i)layer"):
        model.set_aux_hidden_state_layers(bad)
        direct_forward(model, vllm_config)


class _FakePPGroup:
    """A pipeline-parallel group of 2 ranks seen from rank 0 (not the last)."""

    world_size = 2
    rank_in_group = 0
    is_first_rank = True
    is_last_rank = False


@pytest.mark.patch_effect(unpatched.DEEPSEEK_NO_AUX)
def test_aux_layers_on_an_earlier_pipeline_rank_raise(model, vllm_config, manifest, monkeypatch):
    import vllm.distributed
    import vllm.distributed.parallel_state
    import vllm.model_executor.models.deepseek_v2 as ds

    n = manifest["num_layers"]
    inner = model.model
    monkeypatch.setattr(inner, "start_layer", 0)
    monkeypatch.setattr(inner, "end_layer", n // 2)
    fake = _FakePPGroup()
    for mod in (ds, vllm.distributed, vllm.distributed.parallel_state):
        monkeypatch.setattr(mod, "get_pp_group", lambda: fake)
    with pytest.raises(ValueError, match=r"(?i)pipeline"):
        model.set_aux_hidden_state_layers(model.get_eagle3_aux_hidden_state_layers())
        direct_forward(model, vllm_config)


@pytest.mark.patch_effect(unpatched.DEEPSEEK_NO_AUX)
def test_aux_layers_not_owned_by_the_last_rank_raise(model, vllm_config, manifest, monkeypatch):
    """The last rank owns layers [n//2, n): asking for layer 2 must fail loudly."""
    n = manifest["num_layers"]
    monkeypatch.setattr(model.model, "start_layer", n // 2)
    with pytest.raises(ValueError, match=r"(?i)pipeline"):
        model.set_aux_hidden_state_layers((2, n // 2))
        direct_forward(model, vllm_config)
