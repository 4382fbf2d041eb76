"""EAGLE-3 served end to end by vLLM's CPU model runner: engine start and its
profile run, the runner asking the target for the drafter's aux layers (the
drafter fixture asks for [0, 4, 7]: layer 0 is the embedding), the target's
forward (eager, or compiled with torch.compile), the proposer's multi-step
drafts and the rejection sampler, greedy and sampled. The pair accepts
drafts (fixtures.py, "the accepting pair": deepseek_v3_accept or the
wrapper, eagle3_accept), so the accept branch, the bonus token and the
steps after a partial acceptance run. Where vLLM's CPU runner lacks what serving
needs (the releases of stand_ins.py, tabled in docs/cpu-bugs.md),
cpu_spec_decode.py stands in for its kernels and device plumbing; the GPU
runner's steps, the proposer and the sampler stay the release's own.

Runs only in a process of its own (``VPATCH_VLLM_SERVED=eager|compiled``, one
engine per process; the tier's served checks start it,
their modes in vllm_tier.checks). The target is the tiny DeepSeek-V3, or with
``VPATCH_VLLM_SERVED_TARGET=kimi_k25`` the tiny KimiK25ForConditionalGeneration
users serve (the same text model inside the wrapper, with its vision tower);
``VPATCH_VLLM_SERVED_TP=2`` serves it at tensor_parallel_size=2 (the ranks in
processes of their own: the lossless test only, its kernel mode switched in
the ranks). Unpatched, vLLM fails with the error users met (``FAILS``,
declared in unpatched.py): 0.15-0.17's SpeculativeConfig refuses eagle3 for
the DeepSeek-V3 target (Kimi-K2.5's text model is DeepSeek-V3's), 0.18+
raise the upstream TypeError (Tensor + None) at the first generate, in the
engine's profile run, inside Dynamo, or in the ranks, depending on the
release and run. Each fails in the ``served`` fixture's setup or in the
test's own generate: a strict xfail either way. Patched it serves:

* losslessly: greedy tokens with the drafter equal those of the eager engine
  without it at TP 1 (another process, plain_generate.py), over a batch of
  prompts of different lengths; and accepting exactly what the float64
  reference predicts (acceptance.py, from the plain engine's tokens and
  hooked aux states): vLLM's spec-decode counters (drafts, draft tokens,
  accepted tokens per draft position) equal its figures, steps that accept
  every draft among them, and the kernels that accept ran in the generate.
  Compiled too: the compiled speculative engine must give the eager
  engine's tokens (a compiled plain engine was a second
  compile, 65 s a run, for a reference no stricter). Where the tier runs the
  release's own Triton kernels by Triton's interpreter (cpu_spec_decode),
  the engine (each rank, at TP 2) must have launched them, and the generate
  each of them on the greedy path (cpu_spec_decode.GREEDY_PATH);
* (eager, TP 1) with the exact wiring: what the drafter's fc gets is the
  concatenation of the target's layer inputs captured by hooks, and every
  proposal vLLM makes is the one an independent float64 reference drafter
  (eagle3_reference.py) makes for its context. A layer-0 fix that fed wrong
  states would still be lossless (verification) and is caught here;
* (Kimi-K2.5) with the proposer's image_token_index taken from the target's
  media_placeholder_token_id (0.15-0.17:
  eagle-alias-kimi-k2-5-media-placeholder-token-id), the vision tower and
  projector the checkpoint's, read from the running engine, and an image
  prompt among the prompts (the vision tower runs in the generate; its media
  tokens reach the drafter's embedding);
* (eager, TP 1, DeepSeek-V3) sampled: seeded requests at temperature 1 and
  top-p 0.9 accept drafts through the random rejection, and their outputs
  come from the plain engine's distribution (acceptance.same_distribution,
  Pearson's chi-squared test of homogeneity, family-wise false-alarm rate
  0.001).

A V2 run (``VLLM_USE_V2_MODEL_RUNNER=1``, cpu_v2_runner: the tier's
served_on_the_v2_runner) serves all of it on vLLM's V2 model runner, the
one GPUs serve these targets with: every rank must run the runner the run
asked for, each of the V2 runner's greedy-path kernels the release has must
launch in the generate, the wiring test reads the V2 speculator; the
proposer's image_token_index is V1's alone (the V2 runner never sets it).

Eager runs in both kernel modes, [cpu] and [cuda] (the CUDA contract inside
the served engine). The compiled run has no [cuda]: vLLM calls its compiled
graph without Dynamo's guards, so the contract cannot be switched per call.
"""

# Over 600 lines: the served tests run in a process of their own (conftest.py's
# SERVED, the checks' served modes name this file); split, each part would need
# its own process and registration

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import unpatched
from helpers import (
    NUM_SPECULATIVE_TOKENS,
    SAMPLED_PROMPT,
    SAMPLED_REQUESTS,
    SERVED_DRAFTER,
    SERVED_FIXTURES,
    SERVED_MAX_TOKENS,
    greedy,
    in_process,
    layer_input,
    sampled,
    served_kwargs,
    served_mode,
    served_prompts,
    served_target,
    served_tp,
    set_contract_in_worker,
    spec_counters,
)
from tier_builders import acceptance, plain_generate
from tier_builders.eagle3_reference import Eagle3Reference
from tier_plugins import cpu_spec_decode, cpu_v2_runner

MODE = served_mode()
COMPILED = MODE == "compiled"
TARGET = served_target()
KIMI = TARGET == "kimi_k25"
TP = served_tp()
# the accepting pair's target (the wrapper's text model is the same)
FIXTURE = SERVED_FIXTURES[TARGET]
# the sampled test: eager, TP 1, the plain DeepSeek-V3 target
SAMPLED = MODE == "eager" and TP == 1 and not KIMI
# the V2 model runner (vllm/v1/worker/gpu/, through vLLM's CPU subclass
# cpu/model_runner.py), where the run's environment selects it (cpu_v2_runner)
V2 = cpu_v2_runner.wanted()
HERE = Path(__file__).resolve().parent

# 0.15-0.17 refuse eagle3 for the target; 0.18+ meet layer 0's missing
# residual where the run does
if COMPILED:
    LAYER0 = unpatched.LAYER0_PLUS_NONE_COMPILED
elif TP > 1:
    LAYER0 = unpatched.LAYER0_PLUS_NONE_IN_A_RANK
else:
    LAYER0 = unpatched.LAYER0_PLUS_NONE
FAILS = unpatched.EAGLE3_REFUSED_DEEPSEEK_V3 + LAYER0
pytestmark = [pytest.mark.patch_effect(FAILS), pytest.mark.layer0_fix, pytest.mark.served]
if COMPILED:
    pytestmark.append(pytest.mark.compiled)


@pytest.fixture(scope="module")
def plain(paths, manifest, tmp_path_factory):
    """The plain engine's run, made on first use by an engine in a child
    process (one engine per process): the tests ask for it after their own
    generate, so an install that fails there (unpatched) spends no plain
    engine run. ``plain()["tokens"]``: the greedy tokens (past max_tokens)."""
    made: list[dict] = []

    def run() -> dict:
        if not made:
            out = tmp_path_factory.mktemp("plain") / "tokens.json"
            aux = manifest["eagle3_layer0_ids"]
            made.append(plain_generate.in_child(paths[FIXTURE], out, aux, SAMPLED))
        return made[0]

    return run


def _lossless(plain) -> list[list[int]]:
    """The greedy tokens the speculative engine must give: the plain ones."""
    return [t[:SERVED_MAX_TOKENS] for t in plain()["tokens"]]


@pytest.fixture(scope="module")
def predicted(plain, paths):
    """What the generate must draft and accept, request by request
    (acceptance.predict: the float64 reference drafter on the plain engine's
    tokens and hooked aux states)."""
    made: list[list[acceptance.Steps]] = []

    def steps() -> list[acceptance.Steps]:
        if not made:
            run = plain()
            ref = Eagle3Reference(Path(paths[SERVED_DRAFTER]), Path(paths[FIXTURE]))
            made.append(acceptance.predict_all(ref, run, NUM_SPECULATIVE_TOKENS, SERVED_MAX_TOKENS))
        return made[0]

    return steps


@pytest.fixture(scope="module")
def served(paths):
    """The target served with the EAGLE-3 drafter asking for layer 0.
    Unpatched 0.26.0 fails here, in the engine's profile run."""
    in_process()
    from vllm import LLM

    return LLM(
        model=paths[FIXTURE],
        speculative_config={
            "method": "eagle3",
            "model": paths[SERVED_DRAFTER],
            "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
        },
        disable_log_stats=False,
        **served_kwargs(COMPILED, TARGET, TP),
    )


# The first error of a generate in this process's engine (unpatched: the
# upstream TypeError). An engine whose step raised is not fit to serve again,
# so later tests fail with the same error instead of waiting on it.
_BROKEN: list[BaseException] = []


def _generate(llm, kernels: str, max_tokens: int = SERVED_MAX_TOKENS):
    """The served prompts' generate, in the test's kernel mode: this process's
    (the kernels fixture) and, at TP > 1, the ranks' (each a process of its
    own), switched back when it is done."""
    if _BROKEN:
        raise _BROKEN[0]
    try:
        if TP > 1:
            llm.collective_rpc(set_contract_in_worker, args=(kernels == "cuda",))
        out = llm.generate(served_prompts(TARGET), greedy(max_tokens), use_tqdm=False)
        if TP > 1:
            llm.collective_rpc(set_contract_in_worker, args=(False,))
        return out
    except Exception as e:
        _BROKEN.append(e)
        raise


def _contract_writes(llm) -> list[int]:
    """The in-place writes of the CUDA contract so far, per rank."""
    return llm.collective_rpc(_contract_stats)


def _contract_stats(worker) -> int:
    from tier_plugins import cuda_contract

    return cuda_contract.STATS["fused_add_rms_norm"]


def _launches(worker) -> dict[str, int]:
    """The interpreted kernels a rank launched (cpu_spec_decode)."""
    return cpu_spec_decode.launches()


def _rank_launches(llm) -> list[dict[str, int]]:
    """The kernels launched so far (interpreted, or vLLM's CPU ports), per
    rank (this process at TP 1)."""
    return llm.collective_rpc(_launches) if TP > 1 else [cpu_spec_decode.launches()]


def _greedy_kernels(worker) -> list[str]:
    """The interpreted kernels on the greedy path of a rank's release and runner."""
    return cpu_spec_decode.greedy_kernels()


def _runner_kind(worker) -> str:
    """ "v2" where the rank runs the V2 model runner (a GPUModelRunner of
    vllm/v1/worker/gpu/model_runner.py: vLLM's CPU one subclasses it), else
    "v1"."""
    gpu = "vllm.v1.worker.gpu.model_runner"
    return "v2" if any(c.__module__ == gpu for c in type(worker.model_runner).__mro__) else "v1"


def _accept_kernels(worker, random: bool) -> list[str]:
    return cpu_spec_decode.accept_kernels(random)


def _idle(kinds: list[str], before: dict[str, int], after: dict[str, int]) -> list[str]:
    """The kernels of ``kinds`` one rank did not launch between two counts."""
    return [k for k in kinds if after.get(k, 0) <= before.get(k, 0)]


@pytest.mark.kernels
def test_served_eagle3_is_lossless(served, plain, predicted, kernels, record_property):
    """Lossless, and accepting exactly what the reference predicts: vLLM's
    spec-decode counters of the generate (drafts, draft tokens, accepted
    tokens per draft position) equal acceptance.counters of the predicted
    steps, among them steps that accepted every draft (the bonus token); the
    kernels that accept launched, on every rank."""
    before = spec_counters(served)
    writes = _contract_writes(served) if TP > 1 and not _BROKEN else []
    interpreted = cpu_spec_decode.needs_interpreter()
    launched = _rank_launches(served) if not _BROKEN else []
    got = [list(o.outputs[0].token_ids) for o in _generate(served, kernels)]
    after = spec_counters(served)
    # every rank runs the model runner the run asked for
    assert served.collective_rpc(_runner_kind) == ["v2" if V2 else "v1"] * TP
    ran = _rank_launches(served)
    if interpreted:
        # the stand-in kernels (the release's own, interpreted) ran in this
        # engine, in each rank at TP > 1 (some only in its profile run:
        # 0.23.0-0.24.0's recovered-token kernel), and each one on the greedy
        # path ran in this generate
        assert all(ran), f"the engine launched no interpreted kernel: {ran}"
        greedy = served.collective_rpc(_greedy_kernels)
        # V2: every release has some (V1's stand-ins of 0.23.0-0.24.0 have none)
        assert all(greedy) or not V2, f"no greedy-path kernel to launch, per rank: {greedy}"
        for rank, (a, b) in enumerate(zip(launched, ran, strict=True)):
            idle = _idle(greedy[rank], a, b)
            assert not idle, f"rank {rank}: the generate launched no {idle} (counts {b})"
    assert got == _lossless(plain), "EAGLE-3 changed the greedy output"
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    steps = predicted()
    want = acceptance.counters(steps, NUM_SPECULATIVE_TOKENS)
    # the pair accepts: some drafts, and some steps every draft (the bonus token)
    last = f"{acceptance.PER_POS}[{NUM_SPECULATIVE_TOKENS - 1}]"
    assert want[last] > 0, f"the reference predicts no step that accepts every draft: {want}"
    assert {k: delta.get(k, 0.0) for k in want} == want, (
        f"vLLM's counters of the generate {delta}, the reference's prediction {want}"
    )
    per_pos = [int(want[f"{acceptance.PER_POS}[{i}]"]) for i in range(NUM_SPECULATIVE_TOKENS)]
    record_property(
        "acceptance",
        f"{int(want['vllm:spec_decode_num_accepted_tokens'])} of "
        f"{int(want['vllm:spec_decode_num_draft_tokens'])} draft tokens in "
        f"{int(want['vllm:spec_decode_num_drafts'])} drafts, per position {per_pos}",
    )
    # the kernels that accept (the rejection's accept branch, interpreted or
    # vLLM's CPU port) ran in this generate, on every rank
    accepting = served.collective_rpc(_accept_kernels, args=(False,))
    assert all(accepting), f"no accepting kernel known, per rank: {accepting}"
    for rank, kinds in enumerate(accepting):
        idle = _idle(kinds, launched[rank], ran[rank])
        assert not idle, f"rank {rank}: the generate launched no {idle} (counts {ran[rank]})"
    if TP > 1:  # the ranks ran in the test's kernel mode
        ran = [b - a for a, b in zip(writes, _contract_writes(served), strict=True)]
        assert all(n > 0 for n in ran) if kernels == "cuda" else not any(ran), (
            f"[{kernels}]: in-place writes of the CUDA contract per rank: {ran}"
        )


def _runner(llm):
    return llm.collective_rpc(lambda worker: worker.model_runner)[0]


def _decoder(target):
    """The DeepseekV2Model whose layers feed the drafter: the target's own,
    or its language model's in a wrapper (Kimi-K2.5; 0.15.x's wrapper holds
    the bare model)."""
    lm = getattr(target, "language_model", target)
    return getattr(lm, "model", lm)


class _Recorder:
    """During one generate of the served engine: the target's layer inputs
    (hooks, copies taken when the layer starts) and token ids per forward,
    what the drafter's fc got, and the drafts the proposer returned with the
    prompt of each row."""

    def __init__(self, llm, ids, media=None):
        self.runner = _runner(llm)
        self.target = self.runner.get_model()
        # V1: the runner's proposer; V2: its speculator (both hold the drafter
        # as .model and draft in .propose)
        self.drafter = self.runner.speculator if V2 else self.runner.drafter
        self.prompts: dict[str, tuple[int, ...]] = {}  # V2: req_id: its prompt
        self.ids = sorted(ids)
        self.media = media  # the media placeholder's token id (the wrapper)
        self.forwards: list[dict] = []
        self.combined: list[tuple[int, torch.Tensor]] = []
        self.proposals: list[tuple[list[tuple[int, ...]], torch.Tensor]] = []
        # the rows of media tokens each embedded (the wrapper's image)
        self.target_media: list[torch.Tensor] = []
        self.drafter_media: list[torch.Tensor] = []
        self.errors: list[Exception] = []

    def _media(self, embed, into, media=None):
        """``embed`` (an embed_input_ids), keeping in ``into`` the rows of
        media tokens it returned: those its is_multimodal mask marks, or
        with ``media`` those whose input id is it."""

        def embed_input_ids(*args, **kwargs):
            out = embed(*args, **kwargs)
            if media is None:
                mask = kwargs.get("is_multimodal")
            else:
                ids = args[0] if args else kwargs["input_ids"]
                mask = ids == media
            if mask is not None and bool(mask.any()):
                into.append(out[: mask.shape[0]][mask].detach().clone())
            return out

        return embed_input_ids

    def _embed_ids(self, module, args, kwargs):
        ids = args[0] if args else kwargs.get("input")
        self.forwards.append({"input_ids": ids.detach().clone(), "states": {}})

    def _layer_input(self, index):
        def hook(module, args, kwargs):
            try:
                self.forwards[-1]["states"][index] = layer_input(module, args, kwargs)
            except Exception as e:  # never break the engine: reported after
                self.errors.append(e)

        return hook

    def __enter__(self):
        decoder = _decoder(self.target)
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
            n = drafts.shape[0]
            if V2:  # the batch is propose's first argument
                batch = kwargs["input_batch"] if "input_batch" in kwargs else args[0]
                prompts = [self.prompts[r] for r in batch.req_ids[:n]]
            else:
                batch = self.runner.input_batch
                prompts = [
                    tuple(self.runner.requests[r].prompt_token_ids) for r in batch.req_ids[:n]
                ]
            self.proposals.append((prompts, drafts.detach().clone().cpu()))
            return out

        model.combine_hidden_states = combine_hidden_states
        self.drafter.propose = propose_
        if self.media is not None:
            target = self.target
            target.embed_input_ids = self._media(target.embed_input_ids, self.target_media)
            # the drafter's own embedding (its model's, under the outer
            # embed_input_ids V1 calls with the multimodal embeddings, which
            # the V2 runner does not pass to a Llama EAGLE-3 drafter)
            inner = model.model
            inner.embed_input_ids = self._media(
                inner.embed_input_ids, self.drafter_media, self.media
            )
        if V2:  # the V2 runner keeps no prompt per request: take it as added
            add = self.runner.add_requests

            def add_requests(scheduler_output):
                for new in scheduler_output.scheduled_new_reqs:
                    self.prompts[new.req_id] = tuple(new.prompt_token_ids)
                return add(scheduler_output)

            self.runner.add_requests = add_requests
        return self

    def __exit__(self, *exc):
        del self.drafter.model.combine_hidden_states
        del self.drafter.propose
        if self.media is not None:
            del self.target.embed_input_ids
            del self.drafter.model.model.embed_input_ids
        if V2:
            del self.runner.add_requests
        for h in self.handles:
            h.remove()
        if self.errors and exc[0] is None:
            raise self.errors[0]


# hooks inside a compiled graph never run, nor in a rank's own process
if not COMPILED and TP == 1:

    @pytest.mark.kernels
    def test_served_drafter_gets_the_target_layer_inputs(
        served, plain, predicted, paths, manifest, kernels
    ):
        ids = manifest["eagle3_layer0_ids"]
        media = manifest["media_placeholder_token_id"] if KIMI else None
        with _Recorder(served, ids, media) as rec:
            outs = _generate(served, kernels)
        got = [list(o.outputs[0].token_ids) for o in outs]
        assert got == _lossless(plain)
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

        # 2. every proposal is the reference's for its context: the steps the
        # reference predicts, in order, and maybe one more (the proposer
        # drafts for a request in the step that ends it too)
        ref = Eagle3Reference(Path(paths[SERVED_DRAFTER]), Path(paths[FIXTURE]))
        run = plain()
        prompts = [tuple(p) for p in run["prompt_token_ids"]]
        assert set(prompts) == set(outputs), (sorted(prompts), sorted(outputs))
        drafted: dict[tuple[int, ...], list[list[int]]] = {p: [] for p in prompts}
        for rows, drafts in rec.proposals:
            for row, prompt in enumerate(rows):
                drafted[prompt].append(drafts[row].tolist())
        for prompt, tokens, aux, steps in zip(
            prompts, run["tokens"], run["states"], predicted(), strict=True
        ):
            want = steps.drafts
            end = len(prompt) + steps.emitted[-1] + steps.accepted[-1] + 1
            more = ref.drafts(aux[: end - 1], [*prompt, *tokens][1:end], NUM_SPECULATIVE_TOKENS)
            got = drafted[prompt]
            assert got in (want, [*want, more]), (
                f"prompt {list(prompt)}: vLLM drafted {got}, the reference drafter fed the "
                f"hooked states drafts {want} (then {more}) at tokens {steps.emitted}"
            )

        # 3. the wrapper's image: the target embedded its media tokens as the
        # vision tower's output, and the drafter's embedding met them too, as
        # the placeholder token: vLLM's Llama EAGLE-3 drafter embeds token ids
        # (llama_eagle3.py's embed_input_ids ignores the multimodal embeddings
        # V1's proposer passes it; the V2 runner passes none to a drafter
        # without supports_multimodal_embeddings). The image reaches it
        # through the target's states at those positions (1. above), as the
        # reference drafter models it.
        if media is not None:
            assert any(media in p for p in prompts), f"no prompt holds the media token {media}"
            assert rec.target_media, "the target embedded no media token"
            assert rec.drafter_media, "the drafter's embedding met no media token"
            token = ref.embed[media].to(torch.float32)
            image = torch.cat(rec.target_media)
            drafted = torch.cat(rec.drafter_media)
            # every media token of the prefill (the V2 runner's drafter embeds
            # them more than once: 8 rows for 4 on 0.32.0)
            assert drafted.shape[0] >= image.shape[0], (drafted.shape, image.shape)
            assert not torch.equal(image, token.expand_as(image)), "no vision tower output"
            assert torch.equal(drafted, token.expand_as(drafted)), (
                "the drafter embedded the media tokens otherwise than as the placeholder token: "
                f"max |diff| = {(drafted - token).abs().max().item()}"
            )


if SAMPLED:

    @pytest.mark.one_mode
    def test_served_sampled_is_the_targets_distribution(served, plain, manifest, kernels):
        """Sampled (SAMPLED_TEMPERATURE, SAMPLED_TOP_P, each request seeded):
        the speculative engine accepts drafts, through the random rejection's
        kernels, and its SAMPLED_REQUESTS outputs of SAMPLED_PROMPT come from
        the distribution the plain engine's do, by acceptance.same_distribution:
        Pearson's chi-squared test of homogeneity on each position's token and
        on how often a token is the greedy one, family-wise false-alarm rate
        acceptance.ALPHA (0.001)."""
        before = spec_counters(served)
        launched = _rank_launches(served)
        interpreted = cpu_spec_decode.interpreted()  # TP 1: the rank is this process
        outs = served.generate(
            [SAMPLED_PROMPT] * SAMPLED_REQUESTS,
            [sampled(SAMPLED_REQUESTS + i) for i in range(SAMPLED_REQUESTS)],
            use_tqdm=False,
        )
        after = spec_counters(served)
        ran = _rank_launches(served)
        accepted = after.get("vllm:spec_decode_num_accepted_tokens", 0.0) - before.get(
            "vllm:spec_decode_num_accepted_tokens", 0.0
        )
        assert accepted > 0, f"no draft accepted sampled: {after}"
        kinds = cpu_spec_decode.accept_kernels(True)
        assert kinds, "no random rejection kernel known"
        idle = _idle(kinds, launched[0], ran[0])
        assert not idle, f"the sampled generate launched no {idle} (counts {ran[0]})"
        # where vLLM's CPU port is stood in for, the stand-in ran, not the port
        stood = cpu_spec_decode.sampled_stand_ins()
        port = _idle(stood, interpreted, cpu_spec_decode.interpreted())
        assert not port, (
            f"the sampled generate ran vLLM's CPU port of {port}, not the tier's stand-in "
            f"(interpreted: {cpu_spec_decode.interpreted()})"
        )
        spec = [list(o.outputs[0].token_ids) for o in outs]
        tests = acceptance.same_distribution(spec, plain()["sampled"], manifest["accept_next"])
        alpha = acceptance.level(len(tests))
        failed = [t for t in tests if t[3] < alpha]
        assert not failed, (
            f"the speculative engine's samples are not the plain engine's distribution "
            f"(each test at {alpha:g}): "
            + "; ".join(f"{w}: chi2 {x:.1f}, df {df}, p {q:.2g}" for w, x, df, q in failed)
        )


def _image_token_index(worker) -> int:
    return worker.model_runner.drafter.model.config.image_token_index


# The wrapper's checks read the engine after it served the prompts: an
# unpatched engine fails there, or before (0.15-0.17 refuse eagle3 for the
# target, 0.26.0 fails in its profile run).
# The V2 runner gives the drafter no image token id (vllm/v1/worker/gpu/ never
# sets image_token_index; the V1 proposer does, llm_base_proposer.py).
if KIMI and not V2:

    def test_served_drafter_takes_the_media_placeholder_id(served, manifest, kernels):
        """vLLM's proposer gives an EAGLE-3 drafter of a multimodal target the
        target's image token id; for Kimi-K2.5 that is media_placeholder_token_id
        (0.15-0.17 read image_token_index, which Kimi's config lacks: patch
        0003), on every rank."""
        _generate(served, kernels)
        want = manifest["media_placeholder_token_id"]
        assert served.collective_rpc(_image_token_index) == [want] * TP


if KIMI and TP == 1:

    def test_served_kimi_runs_the_checkpoints_vision_tower(served, paths, kernels):
        """The wrapper is whole: its vision tower and projector, built at the
        config's tiny size, compute with the checkpoint's weights (the
        projector's proj.0/proj.2 are vLLM's linear_1/linear_2). vLLM's CPU
        linear layers may repack their weights after loading, so each linear
        layer is compared by what it computes, x W^T + b, the other
        parameters by value."""
        from safetensors.torch import load_file

        _generate(served, kernels)

        ckpt = load_file(str(Path(paths[TARGET]) / "model.safetensors"))
        ckpt = {
            k.replace("mm_projector.proj.0.", "mm_projector.linear_1.").replace(
                "mm_projector.proj.2.", "mm_projector.linear_2."
            ): v
            for k, v in ckpt.items()
            if k.startswith(("vision_tower.", "mm_projector."))
        }
        model = _runner(served).get_model()
        seen = set()
        gen = torch.Generator().manual_seed(0)
        for prefix in ("vision_tower", "mm_projector"):
            for name, module in getattr(model, prefix).named_modules(prefix=prefix):
                own = {f"{name}.{n}": p for n, p in module.named_parameters(recurse=False)}
                if hasattr(module, "quant_method") and f"{name}.weight" in ckpt:
                    w, b = ckpt[f"{name}.weight"], ckpt.get(f"{name}.bias")
                    x = torch.randn(3, w.shape[1], generator=gen)
                    out = module(x)
                    out = out[0] if isinstance(out, tuple) else out
                    want = x @ w.T + (b if b is not None else 0)
                    torch.testing.assert_close(out, want, msg=name)
                    seen |= set(own)
                    continue
                for n, p in own.items():
                    assert torch.equal(p.detach().cpu(), ckpt[n]), n
                    seen.add(n)
        assert seen == set(ckpt), sorted(set(ckpt) ^ seen)
