"""What vLLM's CPU model runner lacks to serve EAGLE-3, stood in for (a pytest
plugin, loaded through cpu_workarounds by the inner suite's conftest and by
the processes it starts), on the releases that lack it. Only kernels and
device plumbing are stood in for: every step the GPU runs in Python (the GPU
model runner's spec-decode steps, the proposer, the rejection sampler's
logic, the series' patches) stays the release's own code, so its errors are
vLLM's own.

vLLM's CPU runner (``vllm/v1/worker/cpu_model_runner.py``, ``CPUModelRunner``,
a subclass of ``GPUModelRunner``) cannot serve EAGLE-3 on some releases; what
it lacks on which releases, and the stand-in for each, are stand_ins.py's
``STAND_INS`` (the one statement of their spans; the table is docs/tier.md's
"What the CPU runner lacks, stood in for"). How each stand-in works:

* **The assert** (``ASSERT``): the runner's own ``__init__`` is recompiled
  from its source without that one statement (anything else in it runs as
  it is).
* **load_model** (``LOAD_MODEL``, an engine with a speculative config only):
  ``GPUModelRunner.load_model`` of the release runs instead, under the CPU
  runner's own CUDA placeholders (``cpu_model_runner._torch_cuda_wrapper``):
  it loads the drafter (``EagleProposer.load_model``), checks
  ``supports_eagle3`` (``Model does not support EAGLE3 interface but
  aux_hidden_state_outputs was requested``) and hands the target the aux
  layers, as on a GPU. Its ``DeviceMemoryProfiler`` measures nothing here
  (the CPU platform's ``get_current_memory_usage`` may raise
  NotImplementedError); the measure only feeds a log line.
* **CUDA streams** (``STREAMS``): ``GPUModelRunner._copy_draft_token_ids_to_cpu``
  and ``_copy_valid_sampled_token_count`` copy on a side CUDA stream
  (``torch.cuda.current_stream``, ``torch.cuda.stream``, ``wait_stream``).
  They run as they are, with those calls no-ops: on CPU there is one stream
  and the copy is done when it returns. The CPU runner's stream placeholders
  get the ``wait_stream`` they lack.
* **Triton's host helper** (``HOST_TRITON``): ``EagleProposer`` sizes its
  kernels' blocks with ``triton.next_power_of_2``; vLLM's Triton placeholder
  (``vllm/triton_utils/importing.py``, what ``triton`` is without a GPU
  driver) has no such attribute. ``vllm.v1.spec_decode.eagle`` gets the real
  ``triton`` module.
* **Triton kernels** (``KERNELS``), run by Triton's interpreter
  (``TRITON_INTERPRET=1``, set by the tier's run environment before anything
  imports triton): the release's own ``@triton.jit`` functions, which vLLM's
  placeholder ``jit`` left as plain Python functions, are made Triton
  ``InterpretedFunction``s again with the real ``triton``/``tl`` in their
  globals, and every vLLM module that holds the function (or the CPU
  runner's C++ stand-in for it, ``vllm/utils/cpu_triton_utils.py``) gets the
  interpreted kernel; so does a JIT-warmup dispatcher holding it as its
  ``kernel`` (``model_executor/warmup/jit_warmup_triton_helper.py``). Which
  kernels: the stand-in's ``kernels`` (None: every kernel of
  KERNEL_MODULES). The served greedy path launches those of GREEDY_PATH
  the release has.

  The interpreter was chosen over torch ports by measurement (on 0.17.1 it
  costs 1.7-1.8 s a served run, ports 0.1-0.3 s: docs/measurements.md).

Any other release is left as it is. ``installed()`` names what acted,
``launches()`` counts the interpreted kernels' launches.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import inspect
import sys
import textwrap
import types
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from . import cpu_v2_runner, hooks, stand_ins
from .stand_ins import ASSERT, HOST_TRITON, LOAD_MODEL, STREAMS

KERNEL_MODULES = (
    "vllm.v1.spec_decode.utils",
    "vllm.v1.spec_decode.eagle",
    "vllm.v1.sample.rejection_sampler",
)
# The kernels a greedy speculative step launches, where the release has them
# (seen in the served runs' counts: 0.15-0.17 the first three; 0.19.1 all
# four; 0.30.0 the last two): each of these the release interprets must run
# in a served generate, not only in the engine's profile run.
GREEDY_PATH = (
    "eagle_prepare_inputs_padded_kernel",
    "eagle_prepare_next_token_padded_kernel",
    "rejection_greedy_sample_kernel",
    "eagle_step_slot_mapping_metadata_kernel",
)
# The kernels that accept drafts: the greedy rejection (its accept branch and
# bonus-token store) and the random one with its recovered tokens. A served
# generate that accepts must launch the ones of its kind, interpreted or
# vLLM's own CPU port (0.20.0+: vllm/utils/cpu_triton_utils.py, C++ ops),
# whichever the release runs.
ACCEPT_PATH = ("rejection_greedy_sample_kernel",)
RANDOM_PATH = ("rejection_random_sample_kernel", "sample_recovered_tokens_kernel")
# the CPU runner's assert, as the releases of ASSERT write it
ASSERT_TEXT = "spec decode is not supported"
# the GPU runner's methods that copy on a side CUDA stream (STREAMS)
STREAM_METHODS = ("_copy_draft_token_ids_to_cpu", "_copy_valid_sampled_token_count")

_installed: list[str] = []
_launched = hooks.Launches("CPU spec decode")
_ports: Counter[str] = Counter()  # vLLM's CPU ports' calls (count_cpu_ports)
# kernel name: (the release's raw function, the interpreted kernel)
_kernels: dict[str, tuple[Callable[..., Any], _Interpreted]] = {}


def release() -> str:
    import vllm

    return vllm.__version__


def _acts(kind: str) -> bool:
    return stand_ins.acts(kind, release())


def kernels_to_interpret() -> tuple[str, ...] | None:
    """The kernels this release runs by the interpreter (() for none, None
    for every kernel of KERNEL_MODULES)."""
    return stand_ins.kernels(release())


def needs_interpreter() -> bool:
    """Kernels of this run are interpreted: the release's stand-ins, or every
    kernel of a V2 run (cpu_v2_runner)."""
    return cpu_v2_runner.wanted() or stand_ins.interprets(release())


# ------------------------------------------------------------------ the assert


class _DropAssert(ast.NodeTransformer):
    def __init__(self) -> None:
        self.dropped = 0

    def visit_Assert(self, node: ast.Assert) -> ast.Assert | None:
        if ASSERT_TEXT in ast.unparse(node):
            self.dropped += 1
            return None
        return node


def _without_the_assert(cls: type) -> Callable[..., None]:
    """``cls.__init__`` recompiled from its source without the assert: the
    same code object otherwise (its file and line numbers, its module's
    globals, ``super()``'s class cell)."""
    init = cls.__init__
    fn = ast.parse(textwrap.dedent(inspect.getsource(init))).body[0]
    drop = _DropAssert()
    drop.visit(fn)
    if drop.dropped != 1:
        raise RuntimeError(
            f"cpu_spec_decode: expected one assert {ASSERT_TEXT!r} in "
            f"{cls.__qualname__}.__init__, found {drop.dropped}"
        )
    # a class body around it, so that the compiled function has the
    # __class__ cell zero-argument super() reads
    holder = ast.ClassDef(
        name=cls.__name__, bases=[], keywords=[], body=[fn], decorator_list=[], type_params=[]
    )
    module = ast.Module(body=[holder], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, init.__code__.co_firstlineno - 1)
    code = compile(module, inspect.getsourcefile(init) or "<cpu_model_runner>", "exec")
    body = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    fcode = next(
        c for c in body.co_consts if isinstance(c, types.CodeType) and c.co_name == "__init__"
    )
    assert fcode.co_freevars == ("__class__",), fcode.co_freevars
    module_globals = sys.modules[cls.__module__].__dict__
    new = types.FunctionType(
        fcode, module_globals, "__init__", init.__defaults__, (types.CellType(cls),)
    )
    new.__qualname__ = init.__qualname__
    new.__wrapped__ = init  # type: ignore[attr-defined]
    return new


# ------------------------------------------------------------------ load_model


class _NoMemoryProfiler:
    """vLLM's DeviceMemoryProfiler without the platform's memory reading,
    which the CPU platform lacks before 0.23.0: nothing consumed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.consumed_memory = 0

    def __enter__(self) -> _NoMemoryProfiler:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _gpu_load_model(cpu_load_model: Callable[..., None]) -> Callable[..., None]:
    from vllm.v1.worker import cpu_model_runner, gpu_model_runner

    @functools.wraps(cpu_load_model)
    def load_model(self: Any, *args: Any, **kwargs: Any) -> None:
        if self.speculative_config is None:
            return cpu_load_model(self, *args, **kwargs)
        profiler = gpu_model_runner.DeviceMemoryProfiler
        gpu_model_runner.DeviceMemoryProfiler = _NoMemoryProfiler
        try:
            with cpu_model_runner._torch_cuda_wrapper():
                return gpu_model_runner.GPUModelRunner.load_model(self, *args, **kwargs)
        finally:
            gpu_model_runner.DeviceMemoryProfiler = profiler

    load_model.__vpatch_spec_decode__ = True  # type: ignore[attr-defined]
    return load_model


# ------------------------------------------------------------------ CUDA streams


class _NoStream:
    """A CUDA stream on CPU: there is one stream, and work is done when the
    call returns."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def wait_stream(self, stream: object) -> None:
        pass

    def synchronize(self) -> None:
        pass


@contextlib.contextmanager
def _no_cuda_streams() -> Iterator[None]:
    import torch

    saved = torch.cuda.current_stream, torch.cuda.stream
    torch.cuda.current_stream = lambda device=None: _NoStream()  # type: ignore[assignment]
    torch.cuda.stream = lambda stream=None: contextlib.nullcontext()  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.cuda.current_stream, torch.cuda.stream = saved


def _streamless(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _no_cuda_streams():
            return method(self, *args, **kwargs)

    return run


def _give_streams_wait(runner: Any) -> None:
    """The CPU runner made its CUDA streams under its placeholders
    (``_StreamPlaceholder``), which have no ``wait_stream``: every one of them
    (the two copy streams, and any other the GPU runner's __init__ made, such
    as its comm or async-output stream) becomes a stream that waits for
    nothing, the one stream a CPU has."""
    for name, value in list(vars(runner).items()):
        if type(value).__name__ == "_StreamPlaceholder":
            setattr(runner, name, _NoStream())


# ------------------------------------------------------------------ Triton kernels


class _Interpreted:
    """``kernel[grid](*args)``: the release's own kernel, launched by Triton's
    interpreter (a program after another, on the CPU tensors themselves)."""

    def __init__(self, name: str, fn: Any) -> None:
        self.name = name
        self.fn = fn

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        launch = self.fn[grid]

        def run(*args: Any, **kwargs: Any) -> Any:
            with _launched.timed(self.name):
                return launch(*args, **kwargs)

        return run

    @property
    def arg_names(self) -> list[str]:
        """The kernel's parameters (0.30.0's dispatchers bind arguments by them)."""
        return list(self.fn.arg_names)

    def __repr__(self) -> str:
        return f"<interpreted Triton kernel {self.name}>"


def _is_raw_kernel(obj: object, module: types.ModuleType) -> bool:
    """A function of ``module`` written as a Triton kernel, which vLLM's
    placeholder ``jit`` returned as it is."""
    if not isinstance(obj, types.FunctionType) or obj.__module__ != module.__name__:
        return False
    try:
        lines, _ = inspect.getsourcelines(obj)
    except (OSError, TypeError):
        return False
    for line in lines:  # the decorators, up to the def
        if line.lstrip().startswith("def "):
            return False
        if line.lstrip().startswith("@triton.jit"):
            return True
    return False


def _interpret_module(module: types.ModuleType) -> dict[str, tuple[Callable[..., Any], Any]]:
    """Every raw kernel of ``module`` as an InterpretedFunction, in one copy of
    the module's globals with the real triton and tl (a kernel calling
    another finds it interpreted)."""
    import triton
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    if not triton.knobs.runtime.interpret:
        raise RuntimeError(
            "cpu_spec_decode: Triton's interpreter is off: TRITON_INTERPRET=1 must be set "
            "before triton is imported (the tier's run environment sets it: "
            "vllm_tier/runenv.py); triton.language's own functions are jitted at import"
        )
    raw = {n: f for n, f in vars(module).items() if _is_raw_kernel(f, module)}
    namespace = dict(vars(module))
    namespace.update(triton=triton, tl=tl)
    out: dict[str, tuple[Callable[..., Any], Any]] = {}
    for name, fn in raw.items():
        copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__)
        copy.__module__, copy.__qualname__ = fn.__module__, fn.__qualname__
        interpreted = InterpretedFunction(copy)
        namespace[name] = interpreted
        out[name] = (fn, interpreted)
    return out


def _replaces(held: object, name: str, raw: Callable[..., Any]) -> bool:
    """Whether ``held`` is kernel ``name``: the raw kernel, or what vLLM's CPU
    runner put in its place. That is, 0.20.0-0.30.0, the runner's wrapper of
    its CPU port (``cpu_triton_utils.<name>``, a ``_FuncWrapper``) and,
    0.31.0+, the platform's override routing launches to the port
    (``register_triton_kernel_overrides``: ``triton_utils/dispatcher.py``'s
    ``KernelOverride``, whose ``func`` is ``cpu_triton_utils._<name>_impl``),
    which replaces the kernel before the runner is built."""
    if held is None:
        return False
    if held is raw:
        return True
    cpu_tl = sys.modules.get("vllm.utils.cpu_triton_utils")
    if cpu_tl is None:
        return False
    port = getattr(cpu_tl, f"_{name}_impl", None)
    return held is getattr(cpu_tl, name, None) or (
        port is not None and getattr(held, "func", None) is port
    )


def _swap_kernels() -> None:
    """Every loaded vLLM module holding a kernel (or vLLM's CPU stand-in for
    it), and every launcher object of a module holding one as its ``kernel``
    (0.30.0's JIT-warmup dispatchers), now holds the interpreted kernel. Run
    again after the CPU runner's own ``_postprocess_triton`` (0.20.0+),
    which puts its stand-ins in."""
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("vllm"):
            continue
        for name, (raw, interpreted) in _kernels.items():
            if _replaces(getattr(module, name, None), name, raw):
                setattr(module, name, interpreted)
        for value in list(vars(module).values()):
            # a plain instance's own attributes only (some extension objects
            # answer __dict__ with something else, or raise)
            try:
                attrs = getattr(value, "__dict__", None)
            except Exception:  # noqa: BLE001 - not a launcher either way
                continue
            held = attrs.get("kernel") if isinstance(attrs, dict) else None
            if held is None or isinstance(value, type):
                continue
            for name, (raw, interpreted) in _kernels.items():
                if _replaces(held, name, raw):
                    value.kernel = interpreted


def _install_kernels(names: tuple[str, ...] | None) -> None:
    for module_name in KERNEL_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name, (raw, fn) in _interpret_module(module).items():
            if names is None or name in names:
                _kernels[name] = (raw, _Interpreted(name, fn))
    missing = sorted(set(names or ()) - set(_kernels))
    if missing:
        raise RuntimeError(f"cpu_spec_decode: no Triton kernel {missing} in {KERNEL_MODULES}")
    _swap_kernels()
    _installed.append(f"Triton interpreter: {', '.join(sorted(_kernels))}")


# ------------------------------------------------------------------ vLLM's CPU ports


def count_cpu_ports() -> list[str]:
    """Count the calls of vLLM's own CPU ports of the spec-decode kernels
    (0.20.0+, ``vllm/utils/cpu_triton_utils.py``: each ``_<kernel>_impl``,
    which the CPU runner (``_postprocess_triton``, through its
    ``_FuncWrapper`` objects) or the platform
    (``register_triton_kernel_overrides``, 0.31.0+) puts in place of the
    Triton kernel), before either reads them. Nothing else changes: the
    port runs as it is. The names counted."""
    try:
        cpu_tl = importlib.import_module("vllm.utils.cpu_triton_utils")
    except ImportError:
        return []
    names = []
    for name in (*GREEDY_PATH, *ACCEPT_PATH, *RANDOM_PATH, "expand_kernel"):
        impl = getattr(cpu_tl, f"_{name}_impl", None)
        if impl is None or name in names:
            continue

        def counted(*args: Any, _impl: Any = impl, _name: str = name, **kwargs: Any) -> Any:
            _ports[_name] += 1
            return _impl(*args, **kwargs)

        setattr(cpu_tl, f"_{name}_impl", counted)
        wrapper = getattr(cpu_tl, name, None)  # 0.20.0-0.30.0: a _FuncWrapper of the impl
        if getattr(wrapper, "func", None) is impl:
            wrapper.func = counted
        names.append(name)
    return names


# ------------------------------------------------------------------ install


def _after_init(init: Callable[..., None], streams: bool) -> Callable[..., None]:
    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if self.speculative_config is None:
            return
        if streams:
            _give_streams_wait(self)
        if _kernels:
            _swap_kernels()

    return __init__


def install() -> list[str]:
    """Patch vLLM's CPU runner where the release needs it (idempotent). A V2
    run (cpu_v2_runner) serves on the V2 runner, which none of this touches:
    nothing."""
    if _installed:
        return list(_installed)
    if cpu_v2_runner.wanted():
        return []
    ports = count_cpu_ports()
    if ports:
        _installed.append(f"vLLM's CPU ports counted: {', '.join(ports)}")
    if not stand_ins.acting(release()):
        return list(_installed)
    from vllm.v1.worker import cpu_model_runner, gpu_model_runner

    runner = cpu_model_runner.CPUModelRunner
    gpu = gpu_model_runner.GPUModelRunner
    init = runner.__init__
    if _acts(ASSERT):
        init = _without_the_assert(runner)
        _installed.append(f"CPUModelRunner.__init__ without its assert {ASSERT_TEXT!r}")
    streams = _acts(STREAMS)
    runner.__init__ = _after_init(init, streams)  # type: ignore[method-assign]
    if _acts(LOAD_MODEL):
        runner.load_model = _gpu_load_model(runner.load_model)  # type: ignore[method-assign]
        _installed.append("CPUModelRunner.load_model = GPUModelRunner.load_model (spec decode)")
    if streams:
        for name in STREAM_METHODS:
            if name in vars(runner):  # the CPU runner's own (0.20.0+): left alone
                continue
            setattr(runner, name, _streamless(getattr(gpu, name)))
        _installed.append(f"GPUModelRunner.{{{', '.join(STREAM_METHODS)}}} without CUDA streams")
    if _acts(HOST_TRITON):
        import triton
        from vllm.v1.sample import rejection_sampler
        from vllm.v1.spec_decode import eagle

        # the proposer's, and (0.15.x) the sampled path's recovered tokens
        for module in (eagle, rejection_sampler):
            module.triton = triton  # type: ignore[attr-defined]
        _installed.append(
            "spec_decode.eagle.triton = sample.rejection_sampler.triton = triton (next_power_of_2)"
        )
    names = kernels_to_interpret()
    if names != ():
        _install_kernels(names)
    return list(_installed)


def installed() -> list[str]:
    return list(_installed)


def launches() -> dict[str, int]:
    """How often each interpreted kernel, or vLLM's CPU port of one, was
    launched in this process (a V2 run: the V2 runner's, cpu_v2_runner)."""
    if cpu_v2_runner.wanted():
        return cpu_v2_runner.launches()
    return dict(_launched.counts + _ports)


def interpreted() -> dict[str, int]:
    """How often each kernel ran by the interpreter in this process (not
    vLLM's CPU port of it, which launches() counts under the same name)."""
    return dict(_launched.counts)


def sampled_stand_ins() -> list[str]:
    """The kernels a sampled generate must run interpreted, in place of
    vLLM's CPU port (stand_ins.SAMPLED; a V2 run: none, its runner never
    calls the port)."""
    if cpu_v2_runner.wanted():
        return []
    return stand_ins.sampled_kernels(release())


def greedy_kernels() -> list[str]:
    """The interpreted kernels of this release on the greedy path
    (GREEDY_PATH; a V2 run: cpu_v2_runner.GREEDY_PATH): a served greedy
    generate must launch each."""
    if cpu_v2_runner.wanted():
        return cpu_v2_runner.greedy_kernels()
    return sorted(set(_kernels) & set(GREEDY_PATH))


def accept_kernels(sampled: bool) -> list[str]:
    """The kernels that accept drafts in a greedy (or a ``sampled``)
    generate, by the names launches() counts them under."""
    if cpu_v2_runner.wanted():
        return cpu_v2_runner.accept_kernels(sampled)
    return list(RANDOM_PATH if sampled else ACCEPT_PATH)


pytest_terminal_summary = _launched.pytest_terminal_summary
pytest_configure, pytest_report_header = hooks.pytest_hooks("CPU spec decode", install, installed)
