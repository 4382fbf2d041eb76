"""Helpers shared by the inner suite (imported by conftest.py and the tests)."""

from __future__ import annotations

import inspect
import os
import re
from contextlib import contextmanager
from pathlib import Path

from packaging.version import Version
from tier_plugins.versions import Span, version

# ------------------------------------------------------------------ settings

FIXTURES = Path(os.environ.get("VPATCH_VLLM_FIXTURES", ""))
PROMPTS = ["w1 w2 w3 w4", "w10 w20 w30", "w100 w7 w42 w42 w8 w9"]
MAX_MODEL_LEN = 256


# vLLM 0.20.0-0.22.1's CPU platform turns the "uni" executor into "mp" whatever
# VLLM_ENABLE_V1_MULTIPROCESSING says (0.23.0 asks it first): the engine would
# run in a worker process, out of the tests' reach (apply_model, hooks, the
# CPU workarounds). The same in-process executor named by its import path is
# not "uni", so the platform leaves it alone.
UNI_BECOMES_MP = Span("0.20.0", "0.22.1")
UNIPROC = "vllm.v1.executor.uniproc_executor.UniProcExecutor"


def engine_kwargs(**kw) -> dict:
    base = dict(
        dtype="float32",
        enforce_eager=True,
        max_model_len=MAX_MODEL_LEN,
        max_num_seqs=4,
        max_num_batched_tokens=MAX_MODEL_LEN,
        seed=0,
    )
    if UNI_BECOMES_MP.covers(vllm_release()):
        base["distributed_executor_backend"] = UNIPROC
    base.update(kw)
    if not base["enforce_eager"]:
        import torch

        # the tier's eager runs disable Dynamo (vllm_tier/runenv.py): a
        # compiled engine there would run eager and prove nothing compiled
        assert not torch._dynamo.config.disable, "TORCHDYNAMO_DISABLE=1 in a compiled run"
    return base


def in_process() -> None:
    """The engine about to be built runs in this process: the test reaches
    its model and worker here (apply_model, collective_rpc).
    vllm_tier/runenv.py sets VLLM_ENABLE_V1_MULTIPROCESSING=0 for every run."""
    assert os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0", "run through the tier"


def engine_args(model: str, **kw):
    from vllm.engine.arg_utils import EngineArgs

    return EngineArgs(model=model, **engine_kwargs(**kw))


def vllm_release() -> Version:
    """The running vLLM's release (tier_plugins.versions: its build label
    dropped)."""
    import vllm

    return version(vllm.__version__)


# What releases say when SpeculativeConfig refuses eagle3 for a target
# (0.15-0.17 unpatched, for DeepSeek and Kimi targets).
EAGLE3_REFUSED = re.compile(r"(?i)eagle3 is only supported")


def eagle3_engine_config(target: str, drafter: str, **kw):
    """The engine config of ``target`` with ``drafter`` as its EAGLE-3 drafter
    (dummy weights). Where the release refuses eagle3 for this target (the
    unpatched 0.15-0.17, covered by test_speculative_config.py), the
    speculative config is built with the target's text model_type looking
    like Llama's and attached without re-validation: what the tests using it
    look at comes after that check."""
    from vllm.config import SpeculativeConfig

    spec = {"method": "eagle3", "model": drafter, "num_speculative_tokens": 3}
    try:
        return engine_args(
            target, load_format="dummy", speculative_config=spec, **kw
        ).create_engine_config()
    except ValueError as e:
        if not EAGLE3_REFUSED.search(str(e)):
            raise
    cfg = engine_args(target, load_format="dummy", **kw).create_engine_config()
    text = cfg.model_config.hf_text_config
    real = text.model_type
    text.model_type = "llama"
    try:
        sc = SpeculativeConfig(
            method="eagle3",
            model=drafter,
            num_speculative_tokens=3,
            target_model_config=cfg.model_config,
            target_parallel_config=cfg.parallel_config,
        )
    finally:
        text.model_type = real
    object.__setattr__(cfg, "speculative_config", sc)
    return cfg


# The targets SpeculativeConfig must admit for EAGLE-3, and the model_type of
# each one's text config, which is what it matches its allowlist against (an
# entry matches when it is a substring). Kimi-K2's config says kimi_k2 and is
# remote code (trust_remote_code); Kimi-K2.5's text config is DeepSeek-V3's,
# as vLLM's KimiK25Config always makes it.
TARGETS = {
    "deepseek_v2": "deepseek_v2",
    "deepseek_v3": "deepseek_v3",
    "kimi_k2": "kimi_k2",
    "kimi_k25": "deepseek_v3",
}


def target_args(paths: dict, target: str, **kw):
    """The engine arguments of one of TARGETS (no weights are loaded)."""
    if target == "kimi_k2":
        kw.setdefault("trust_remote_code", True)
    return engine_args(paths[target], load_format="dummy", **kw)


def greedy(max_tokens: int):
    from vllm import SamplingParams

    return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)


def layer_input(module, args, kwargs):
    """What a decoder layer (or RMSNorm) call is handed, from a forward
    pre-hook's arguments, as the residual stream holds it: hidden_states +
    residual, or hidden_states alone without a residual; DeepSeek-V4's mHC
    streams ([tokens, hc_mult, hidden], its CPU variant's layer input) as
    their mean, the aux state vLLM takes of them; a copy taken now, so later
    in-place ops (the CUDA contract's) cannot touch it."""
    params = list(inspect.signature(module.forward).parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):  # CustomOp.forward(*args)
        a = dict(zip(("x", "residual"), args, strict=False))
        a.update(kwargs)
    else:
        a = inspect.signature(module.forward).bind(*args, **kwargs).arguments
    hs, res = a.get("hidden_states", a.get("x")), a.get("residual")
    if res is None and hs.dim() == 3:
        return hs.mean(dim=1).detach()
    return (hs if res is None else hs + res).detach().clone()


class Capture:
    """During one `llm.generate`, record for every forward call of the model:
    what forward returned, and - independently of the code under test - the
    input of every decoder layer (forward pre-hooks: hidden_states + residual,
    hidden_states alone for the first layer) and of the final norm
    (index num_layers).

    The hooks' values are copies taken at capture time, so later in-place ops
    (the CUDA contract's fused_add_rms_norm) cannot touch them. What forward
    returned is kept by reference on purpose: the tests compare it after the
    whole forward (after every in-place write), which is when EAGLE-3's drafter
    reads it.

    A forward that raises (vLLM 0.18-0.33 asked for layer 0) is answered once
    more without aux layers so that the engine stays consistent for the next
    test; the error is raised when the generate is over."""

    def __init__(self, model, decoder=None):
        self.model = model
        # the DeepseekV2Model whose layers are hooked: model.model, or the
        # language model's for a wrapper such as Kimi-K2.5
        self.decoder = decoder if decoder is not None else model.model
        self.calls: list[dict] = []
        self.errors: list[Exception] = []
        self._handles = []

    def _expect(self, key):
        def hook(module, args, kwargs):
            try:
                self.calls[-1]["expected"][key] = layer_input(module, args, kwargs)
            except Exception as e:  # never break the engine: report after generate
                self.errors.append(e)

        return hook

    def _norm_out(self, module, args, kwargs, output):
        try:
            out = output[0] if isinstance(output, tuple) else output
            self.calls[-1]["norm_out"] = out.detach().clone()
        except Exception as e:
            self.errors.append(e)

    def _without_aux(self, orig, args, kwargs):
        inner = self.decoder
        layers = getattr(inner, "aux_hidden_state_layers", ())
        inner.aux_hidden_state_layers = ()
        try:
            return orig(*args, **kwargs)
        finally:
            inner.aux_hidden_state_layers = layers

    @contextmanager
    def active(self):
        inner = self.decoder
        n = len(inner.layers)
        for i in range(n):
            self._handles.append(
                inner.layers[i].register_forward_pre_hook(self._expect(i), with_kwargs=True)
            )
        self._handles.append(
            inner.norm.register_forward_pre_hook(self._expect(n), with_kwargs=True)
        )
        self._handles.append(inner.norm.register_forward_hook(self._norm_out, with_kwargs=True))
        orig = self.model.forward

        def forward(*args, **kwargs):
            self.calls.append({"expected": {}})
            try:
                out = orig(*args, **kwargs)
            except Exception as e:
                self.errors.append(e)
                out = self._without_aux(orig, args, kwargs)
            self.calls[-1]["out"] = out
            # vLLM's CPU runner expects a tensor; hand it the hidden states.
            return out[0] if isinstance(out, tuple) else out

        self.model.forward = forward
        try:
            yield self
        finally:
            del self.model.forward
            for h in self._handles:
                h.remove()
            self._handles.clear()
        if self.errors:
            raise self.errors[0]


def check_aux(call: dict, layers, num_layers: int) -> None:
    """One forward call recorded by Capture returned the hidden states and, for
    each requested layer in order, exactly the input the hooks captured."""
    import torch

    out = call["out"]
    assert isinstance(out, tuple) and len(out) == 2, (
        f"forward returned {type(out).__name__}, expected (hidden_states, aux_hidden_states)"
    )
    hidden, aux = out
    assert isinstance(hidden, torch.Tensor)
    assert isinstance(aux, list | tuple) and len(aux) == len(layers), (
        f"{len(aux)} aux hidden states for layers {layers}"
    )
    # The hidden states are still the normalised output of the model.
    assert torch.equal(hidden, call["norm_out"])
    for layer, got in zip(sorted(layers), aux, strict=True):
        want = call["expected"][layer]
        assert got.dtype == torch.float32
        assert got.shape == want.shape, (layer, got.shape, want.shape)
        assert torch.equal(got, want), (
            f"aux hidden state of layer {layer} (of {num_layers}) differs from the "
            f"input captured by the hook ({want.shape[0]} tokens): "
            f"max |diff| = {(got - want).abs().max().item()}"
        )


@contextmanager
def stand_in_attention(decoder):
    """Outside the engine there is no attention metadata, and vLLM's CPU
    attention then leaves its output buffer as allocated (NaN, garbage); with
    dummy weights (within +-1e-3) the MLPs' updates are also far below the
    residual stream's rounding. So each layer's attention output is replaced
    by seeded values of its own: the residual stream then differs from layer
    to layer, and an aux state of the wrong layer shows."""
    import torch

    def hook(index):
        def replace(module, args, out):
            gen = torch.Generator().manual_seed(index)
            return torch.randn(out.shape, generator=gen).to(out.dtype)

        return replace

    handles = [
        layer.self_attn.register_forward_hook(hook(i)) for i, layer in enumerate(decoder.layers)
    ]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def direct_forward(model, vllm_config, num_tokens: int = 5):
    """Run the model's forward outside the engine (no attention metadata: the
    attention output is not meaningful, the control flow is)."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.forward_context import set_forward_context

    ids = torch.arange(4, 4 + num_tokens, dtype=torch.long)
    pos = torch.arange(num_tokens, dtype=torch.long)
    with set_current_vllm_config(vllm_config), set_forward_context(None, vllm_config):
        return model(input_ids=ids, positions=pos, intermediate_tensors=None)


# ------------------------------------------------------------------ served speculative decoding

# The served tests' prompts: a batch of different lengths (3 to 9 tokens).
SERVED_PROMPTS = [*PROMPTS, "w5 w6 w7 w8 w9 w10 w11 w12 w13"]
SERVED_MAX_TOKENS = 24
NUM_SPECULATIVE_TOKENS = 3
# The engine's batch: every served prompt at once (5 with the wrapper's image
# prompt), the sampled requests 8 at a time
SERVED_MAX_SEQS = 8
# The plain engine's greedy tokens go this far past SERVED_MAX_TOKENS: the
# last verify step of a request checks drafts past its last token (the
# scheduler counts them accepted before the output is cut at max_tokens)
SERVED_REFERENCE_TOKENS = SERVED_MAX_TOKENS + NUM_SPECULATIVE_TOKENS + 1
# The served pair (fixtures.py, "the accepting pair"), by served target
SERVED_FIXTURES = {
    "deepseek_v3": "deepseek_v3_accept",
    "kimi_k25": "kimi_k25",
    "deepseek_v4": "deepseek_v4",
}
SERVED_DRAFTER = "eagle3_accept"
# DeepSeek-V4's pair (fixtures.py, "DeepSeek-V4"): its drafter accepts the
# first of each step's two drafts
V4_DRAFTER = "eagle3_v4"
V4_SPECULATIVE_TOKENS = 2
# The wrapper is also served an image (the media placeholder, expanded by
# vLLM's processor, between words): its vision tower runs in the generate and
# the drafter's embedding path meets the media tokens.
IMAGE_PROMPT = "w3 w4 <|media_pad|> w5 w6"

# The sampled requests: one prompt, each request seeded, from each engine
# (the plain engine's seeds 0.., the speculative one's SAMPLED_REQUESTS..:
# a seed's first token is the prefill's in both, so the samples would not be
# independent)
SAMPLED_PROMPT = SERVED_PROMPTS[0]
SAMPLED_REQUESTS = 120
SAMPLED_TOKENS = 4
SAMPLED_TEMPERATURE = 1.0
SAMPLED_TOP_P = 0.9


def sampled(seed: int):
    from vllm import SamplingParams

    return SamplingParams(
        temperature=SAMPLED_TEMPERATURE,
        top_p=SAMPLED_TOP_P,
        seed=seed,
        max_tokens=SAMPLED_TOKENS,
        ignore_eos=True,
    )


def served_image():
    """The image of IMAGE_PROMPT: 56 x 56, a seeded pattern (4 x 4 patches,
    one merged 2 x 2: 4 media tokens)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 256, (56, 56, 3), dtype=np.uint8))


def served_prompts(target: str) -> list:
    """The prompts of the served generate: SERVED_PROMPTS, and for the
    wrapper the image prompt too."""
    if target != "kimi_k25":
        return list(SERVED_PROMPTS)
    # Kimi-K2.5's modality: an image as a vision chunk (vLLM's chat path
    # turns an image_url into one)
    chunk = {"type": "image", "image": served_image(), "uuid": None}
    image = {"prompt": IMAGE_PROMPT, "multi_modal_data": {"vision_chunk": [chunk]}}
    return [*SERVED_PROMPTS, image]


def served_mode() -> str:
    """VPATCH_VLLM_SERVED: "eager" or "compiled" in a run of the served tests
    (test_served_spec_decode.py, one engine per process); "" elsewhere."""
    return os.environ.get("VPATCH_VLLM_SERVED", "")


def served_target() -> str:
    """VPATCH_VLLM_SERVED_TARGET: the served target, a fixture name:
    "deepseek_v3" (default) or "kimi_k25" (the KimiK25ForConditionalGeneration
    wrapper users serve)."""
    return os.environ.get("VPATCH_VLLM_SERVED_TARGET", "deepseek_v3")


def served_tp() -> int:
    """VPATCH_VLLM_SERVED_TP: the served engine's tensor_parallel_size (1)."""
    return int(os.environ.get("VPATCH_VLLM_SERVED_TP", "1"))


def served_kwargs(compiled: bool, target: str = "deepseek_v3", tp: int = 1) -> dict:
    """The engine arguments of the served tests, with or without the drafter."""
    # No prefix caching: each generate prefills its prompts whole (the wiring
    # test finds each prompt's states in the prefill).
    kw = engine_kwargs(
        enforce_eager=not compiled, max_num_seqs=SERVED_MAX_SEQS, enable_prefix_caching=False
    )
    if target == "deepseek_v4":
        # as it ships: vLLM's DeepSeek-V4 CPU kernels take bfloat16 (and its
        # fp8_ds_mla KV cache), not the tier's float32
        kw["dtype"] = "bfloat16"
    if target == "kimi_k25":
        # as users serve it (the real one's tokenizer is remote code); the
        # fixture's media processor is remote code too (0.15-0.17 load it so
        # whatever this says)
        kw["trust_remote_code"] = True
    if tp > 1:
        # the ranks in worker processes (vLLM's CPU platform spawns them; the
        # tier's CPU workarounds reach them as a vLLM plugin, see
        # cpu_workarounds.vllm_plugin), each bound to a core of its own
        kw.update(tensor_parallel_size=tp, distributed_executor_backend="mp")
        cores = os.cpu_count() or 1
        os.environ.setdefault(
            "VLLM_CPU_OMP_THREADS_BIND", "|".join(str(r % cores) for r in range(tp))
        )
    return kw


def set_contract_in_worker(worker, on: bool) -> None:
    """collective_rpc: the CUDA contract on or off in an engine's worker (a
    tensor-parallel rank in a process of its own)."""
    from tier_plugins import cuda_contract

    cuda_contract.switch(on)


def spec_counters(llm) -> dict[str, float]:
    """vLLM's spec-decode counters of an engine (disable_log_stats=False);
    the accepted tokens per draft position (a vector) as
    ``<name>[i]``."""
    out: dict[str, float] = {}
    for m in llm.get_metrics():
        if not m.name.startswith("vllm:spec_decode"):
            continue
        if hasattr(m, "values"):
            for i, v in enumerate(m.values):
                key = f"{m.name}[{i}]"
                out[key] = out.get(key, 0.0) + float(v or 0)
        elif hasattr(m, "value"):
            out[m.name] = out.get(m.name, 0.0) + float(m.value or 0)
    return out


def generate_tokens(llm, prompts, max_tokens: int) -> list[list[int]]:
    outs = llm.generate(prompts, greedy(max_tokens), use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]
