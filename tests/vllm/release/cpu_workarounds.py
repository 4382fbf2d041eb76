"""The tier's workarounds of CPU-only vLLM bugs (cpu_rotary, cpu_moe,
cpu_kernel_scan) and its stand-ins for what vLLM's CPU runner lacks to serve
EAGLE-3 (cpu_spec_decode), one plugin each (its docstring says what, where
and why), as one pytest plugin: the inner suite's conftest and the runs of
vLLM's own tests load it (``-p cpu_workarounds``); a process of ours that
makes an engine outside pytest calls ``install()``. Each must be installed
before a model is built."""

from __future__ import annotations

import importlib

PLUGINS = ("cpu_rotary", "cpu_moe", "cpu_kernel_scan", "cpu_spec_decode")
pytest_plugins = list(PLUGINS)


def install() -> None:
    for name in PLUGINS:
        importlib.import_module(name).install()
