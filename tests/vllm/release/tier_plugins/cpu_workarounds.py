"""The tier's workarounds of CPU-only vLLM bugs (cpu_rotary, cpu_moe,
cpu_kernel_scan, cpu_gemm, cpu_deepseek_v4), its stand-ins for what vLLM's CPU runner lacks to serve
EAGLE-3 (cpu_spec_decode) and for what keeps vLLM's V2 model runner off CPU
(cpu_v2_runner, in the V2 runs only), one plugin each (its docstring says what, where
and why), as one pytest plugin: the inner suite's conftest and the runs of
vLLM's own tests load it (``-p tier_plugins.cpu_workarounds``); a process of ours that
makes an engine outside pytest calls ``install()``; the processes vLLM
starts itself (a tensor-parallel engine's ranks: vLLM's CPU platform spawns
them, so nothing of the parent's is patched there) load it as a vLLM general
plugin (``vllm_plugin``, the entry point that ``vpatch_tier-0.dist-info``
beside this file declares; vLLM loads its plugins in every process before a
model is built). Each must be installed before a model is built."""

from __future__ import annotations

import importlib
import os

# first: in a V2 run it puts the stand-in Triton backend on the path, which
# must happen before anything imports triton (cpu_v2_runner's docstring)
from . import cpu_v2_runner  # noqa: F401

PLUGINS = (
    "cpu_rotary",
    "cpu_moe",
    "cpu_kernel_scan",
    "cpu_gemm",
    "cpu_deepseek_v4",
    "cpu_spec_decode",
    "cpu_v2_runner",
)
pytest_plugins = [f"{__package__}.{name}" for name in PLUGINS]


def install() -> None:
    for name in pytest_plugins:
        importlib.import_module(name).install()


def vllm_plugin() -> None:
    """vLLM's general plugin: the workarounds, and the CUDA contract (off,
    switched per test through collective_rpc: helpers.set_contract_in_worker;
    on all through with VPATCH_CUDA_CONTRACT=1, left out with =0)."""
    install()
    contract = os.environ.get("VPATCH_CUDA_CONTRACT", "")
    if contract != "0":
        from . import cuda_contract

        if not cuda_contract.installed():  # the test process's own is its session's
            cuda_contract.install(on=contract == "1")
