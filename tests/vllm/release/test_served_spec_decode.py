"""EAGLE-3 served end to end by vLLM's CPU model runner, on the releases where
it serves it (not those of vllm_tier.releases.NO_EAGLE3_ON_CPU): engine start
and its profile run, the runner asking the target for the drafter's aux layers
(the drafter fixture asks for [0, 4, 7]: layer 0 is the embedding), the
target's forward (eager, or compiled with torch.compile), the proposer's
multi-step drafts and the rejection sampler.

Runs only in a process of its own (``VPATCH_VLLM_SERVED=eager|compiled``, one
engine per process; the tier's outer test_served_speculative_decoding starts
it). Unpatched, vLLM fails with the upstream TypeError (Tensor + None) at the
first generate, in the engine's profile run, or inside Dynamo, depending on
the release and mode; patched it serves:

* losslessly: greedy tokens with the drafter equal those of the eager engine
  without it (another process, plain_generate.py), over a batch of prompts of
  different lengths, and vLLM's spec-decode metrics show drafts proposed and
  verified. Compiled too: the compiled speculative engine must give the eager
  engine's tokens (a compiled plain engine was a second compile, 65 s a run,
  for a reference no stricter);
* (eager) with the exact wiring: what the drafter's fc gets is the
  concatenation of the target's layer inputs captured by hooks, and the drafts
  vLLM proposes after each prefill are those of an independent float64
  reference drafter (eagle3_reference.py) fed the same captured states. A
  layer-0 fix that fed wrong states would still be lossless (verification)
  and is caught here.

Eager runs in both kernel modes, [cpu] and [cuda] (the CUDA contract inside
the served engine). The compiled run has no [cuda]: vLLM calls its compiled
graph without Dynamo's guards, so the contract cannot be switched per call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import unpatched
from eagle3_reference import Eagle3Reference
from helpers import (
    NUM_SPECULATIVE_TOKENS,
    SERVED_MAX_TOKENS,
    SERVED_PROMPTS,
    Capture,
    greedy,
    in_process,
    served_kwargs,
    served_mode,
    spec_counters,
)

MODE = served_mode()
COMPILED = MODE == "compiled"
HERE = Path(__file__).resolve().parent

FAILS = unpatched.LAYER0_PLUS_NONE_COMPILED if COMPILED else unpatched.LAYER0_PLUS_NONE
pytestmark = [pytest.mark.patch_effect(FAILS), pytest.mark.layer0_fix, pytest.mark.served]
if COMPILED:
    pytestmark.append(pytest.mark.compiled)


def _plain_tokens(target: str, out: Path) -> list[list[int]]:
    cmd = [sys.executable, str(HERE / "plain_generate.py"), "--target", target, "--out", str(out)]
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=1500,
        # eager all through, in a compiled run too (see runenv.runtime_env)
        env={**os.environ, "TORCHDYNAMO_DISABLE": "1"},
    )
    assert proc.returncode == 0, (
        f"the plain engine failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return json.loads(out.read_text())["tokens"]


@pytest.fixture(scope="module")
def plain(paths, tmp_path_factory):
    """The greedy tokens without a drafter, made on first use by an engine in
    a child process (one engine per process): the tests ask for them after
    their own generate, so an install that fails there (unpatched) spends no
    plain engine run."""
    made: list[list[list[int]]] = []

    def tokens() -> list[list[int]]:
        if not made:
            out = tmp_path_factory.mktemp("plain") / "tokens.json"
            made.append(_plain_tokens(paths["deepseek_v3"], out))
        return made[0]

    return tokens


@pytest.fixture(scope="module")
def served(paths):
    """The tiny DeepSeek-V3 served with the EAGLE-3 drafter asking for layer 0.
    Unpatched 0.26.0 fails here, in the engine's profile run."""
    in_process()
    from vllm import LLM

    return LLM(
        model=paths["deepseek_v3"],
        speculative_config={
            "method": "eagle3",
            "model": paths["eagle3_layer0"],
            "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
        },
        disable_log_stats=False,
        **served_kwargs(COMPILED),
    )


# The first error of a generate in this process's engine (unpatched: the
# upstream TypeError). An engine whose step raised is not fit to serve again,
# so later tests fail with the same error instead of waiting on it.
_BROKEN: list[BaseException] = []


def _generate(llm, max_tokens: int = SERVED_MAX_TOKENS):
    if _BROKEN:
        raise _BROKEN[0]
    try:
        return llm.generate(SERVED_PROMPTS, greedy(max_tokens), use_tqdm=False)
    except Exception as e:
        _BROKEN.append(e)
        raise


@pytest.mark.kernels
def test_served_eagle3_is_lossless(served, plain, kernels):
    before = spec_counters(served)
    got = [list(o.outputs[0].token_ids) for o in _generate(served)]
    after = spec_counters(served)
    assert got == plain(), "EAGLE-3 changed the greedy output"
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    assert delta.get("vllm:spec_decode_num_drafts", 0) > 0, f"no drafts proposed: {delta}"
    assert delta.get("vllm:spec_decode_num_draft_tokens", 0) > 0, f"no draft tokens: {delta}"
    # verified: the rejection sampler reported on every draft token
    assert "vllm:spec_decode_num_accepted_tokens" in after, sorted(after)


def _runner(llm):
    return llm.collective_rpc(lambda worker: worker.model_runner)[0]


class _Recorder:
    """During one generate of the served engine: the target's layer inputs
    (hooks, copies taken when the layer starts) and token ids per forward,
    what the drafter's fc got, and the drafts the proposer returned with the
    prompt of each row."""

    def __init__(self, llm, ids):
        self.runner = _runner(llm)
        self.target = self.runner.get_model()
        self.drafter = self.runner.drafter
        self.ids = sorted(ids)
        self.forwards: list[dict] = []
        self.combined: list[tuple[int, torch.Tensor]] = []
        self.proposals: list[tuple[list[tuple[int, ...]], torch.Tensor]] = []
        self.errors: list[Exception] = []

    def _embed_ids(self, module, args, kwargs):
        ids = args[0] if args else kwargs.get("input")
        self.forwards.append({"input_ids": ids.detach().clone(), "states": {}})

    def _layer_input(self, index):
        def hook(module, args, kwargs):
            try:
                hs, res = Capture._inputs(module, args, kwargs)
                value = hs if res is None else hs + res
                self.forwards[-1]["states"][index] = value.detach().clone()
            except Exception as e:  # never break the engine: reported after
                self.errors.append(e)

        return hook

    def __enter__(self):
        decoder = self.target.model
        self.handles = [
            decoder.embed_tokens.register_forward_pre_hook(self._embed_ids, with_kwargs=True)
        ]
        for i in self.ids:
            layer = decoder.layers[i]
            self.handles.append(
                layer.register_forward_pre_hook(self._layer_input(i), with_kwargs=True)
            )
        model = self.drafter.model
        combine, propose = model.combine_hidden_states, self.drafter.propose

        def combine_hidden_states(hidden_states):
            self.combined.append((len(self.forwards) - 1, hidden_states.detach().clone()))
            return combine(hidden_states)

        def propose_(*args, **kwargs):
            out = propose(*args, **kwargs)
            drafts = out[0] if isinstance(out, tuple) else out
            batch = self.runner.input_batch
            prompts = [
                tuple(self.runner.requests[r].prompt_token_ids)
                for r in batch.req_ids[: drafts.shape[0]]
            ]
            self.proposals.append((prompts, drafts.detach().clone().cpu()))
            return out

        model.combine_hidden_states = combine_hidden_states
        self.drafter.propose = propose_
        return self

    def __exit__(self, *exc):
        del self.drafter.model.combine_hidden_states
        del self.drafter.propose
        for h in self.handles:
            h.remove()
        if self.errors and exc[0] is None:
            raise self.errors[0]


def _span(ids: torch.Tensor, prompt: tuple[int, ...]) -> int:
    n = len(prompt)
    want = torch.tensor(prompt, dtype=ids.dtype)
    for a in range(ids.shape[0] - n + 1):
        if torch.equal(ids[a : a + n], want):
            return a
    raise AssertionError(f"prompt {prompt} is not in the prefill's tokens {ids.tolist()}")


if not COMPILED:  # hooks inside a compiled graph never run

    @pytest.mark.kernels
    def test_served_drafter_gets_the_target_layer_inputs(served, plain, paths, manifest, kernels):
        ids = manifest["eagle3_layer0_ids"]
        with _Recorder(served, ids) as rec:
            outs = _generate(served)
        got = [list(o.outputs[0].token_ids) for o in outs]
        assert got == plain()
        outputs = {tuple(o.prompt_token_ids): g for o, g in zip(outs, got, strict=True)}
        assert rec.combined, "the drafter's fc was never called"

        # 1. what fc got is the concatenation of the captured layer inputs
        for forward, states in rec.combined:
            n = states.shape[0]
            want = torch.cat([rec.forwards[forward]["states"][i][:n] for i in ids], dim=-1)
            assert states.shape == want.shape, (states.shape, want.shape)
            for j, i in enumerate(ids):
                width = want.shape[-1] // len(ids)
                part = slice(j * width, (j + 1) * width)
                assert torch.equal(states[:, part], want[:, part]), (
                    f"the drafter's fc got, for aux layer {i} (of {ids}), something else than "
                    f"the layer's input captured by the hook ({n} tokens): max |diff| = "
                    f"{(states[:, part] - want[:, part]).abs().max().item()}"
                )

        # 2. the drafts after each prompt's prefill are the reference's
        ref = Eagle3Reference(Path(paths["eagle3_layer0"]), Path(paths["deepseek_v3"]))
        prefill = rec.forwards[0]
        first: dict[tuple[int, ...], list[int]] = {}
        for prompts, drafts in rec.proposals:
            for row, prompt in enumerate(prompts):
                first.setdefault(prompt, drafts[row].tolist())
        assert set(first) == set(outputs), (sorted(first), sorted(outputs))
        for prompt, drafts in first.items():
            a = _span(prefill["input_ids"], prompt)
            aux = torch.cat([prefill["states"][i][a : a + len(prompt)] for i in ids], dim=-1)
            next_ids = [*prompt[1:], outputs[prompt][0]]
            want = ref.drafts(aux, next_ids, NUM_SPECULATIVE_TOKENS)
            assert drafts == want, (
                f"prompt {list(prompt)}: vLLM drafted {drafts}, the reference drafter fed the "
                f"hooked states drafts {want}"
            )
