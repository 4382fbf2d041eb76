"""vLLM's CPU platform scan for Triton kernels to override, kept off the
modules it trips on (a pytest plugin, loaded by the inner suite's conftest and
by the processes it starts).

vLLM 0.31.0-0.33.0 (read from the sdists; measured on 0.32.0):
``CpuPlatform.register_triton_kernel_overrides`` (each worker's
``init_worker``) hands its CPU kernels to ``triton_utils.dispatcher``, whose
``_rebind_kernels`` walks every module in ``sys.modules`` and, for every value
with a ``__dict__``, reads ``vars(value).get("kernel")``. llvmlite's library
wrapper (``llvmlite.binding.ffi.lib``, ``__slots__`` and a ``__getattr__`` that
wraps whatever it is asked for) answers ``__dict__`` with a function wrapper,
and the engine stops: ``AttributeError: '_lib_fn_wrapper' object has no
attribute 'get'``. llvmlite is imported by numba, which vLLM's own Kimi-K2.5
image processor (``KimiK25FusedVisionProcessor``) imports in the engine's
process. The CUDA platform overrides no kernel: a CPU-only vLLM bug, met by
any engine serving Kimi-K2.5 on CPU with numba installed.

So while the platform registers its overrides, the modules holding such a
value are out of ``sys.modules`` (they hold no Triton kernel: nothing the scan
would rebind is missed), and back right after.
"""

from __future__ import annotations

import functools
import sys
from types import ModuleType

from . import hooks

_installed: list[str] = []


def _trips_the_scan(module: ModuleType) -> bool:
    namespace = getattr(module, "__dict__", None) or {}
    for value in list(namespace.values()):
        try:
            # what the scan does with it: a class's mappingproxy answers too
            if hasattr(value, "__dict__") and not callable(getattr(vars(value), "get", None)):
                return True
        except TypeError:  # vars() refuses a __dict__ that is not a mapping
            return True
    return False


def _hiding(register):
    @functools.wraps(register)
    def wrapper(*args, **kwargs):
        hidden = {
            name: m
            for name, m in list(sys.modules.items())
            if isinstance(m, ModuleType) and _trips_the_scan(m)
        }
        for name in hidden:
            del sys.modules[name]
        try:
            return register(*args, **kwargs)
        finally:
            sys.modules.update(hidden)

    wrapper.__vpatch_kernel_scan__ = True
    return wrapper


def install() -> list[str]:
    """Patch vLLM's CpuPlatform where it has the scan (idempotent)."""
    if _installed:
        return list(_installed)
    try:
        from vllm.platforms.cpu import CpuPlatform
    except ImportError:
        return []
    register = CpuPlatform.__dict__.get("register_triton_kernel_overrides")
    if register is None:  # before 0.31.0: no scan
        return []
    fn = register.__func__ if isinstance(register, classmethod) else register
    if not getattr(fn, "__vpatch_kernel_scan__", False):
        CpuPlatform.register_triton_kernel_overrides = classmethod(_hiding(fn))
    _installed.append("CpuPlatform.register_triton_kernel_overrides: llvmlite kept off its scan")
    return list(_installed)


def installed() -> list[str]:
    return list(_installed)


pytest_configure, pytest_report_header = hooks.pytest_hooks("CPU kernel scan", install, installed)
