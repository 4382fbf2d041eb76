"""A pytest plugin for the tier's runs, vLLM's own tests included
(``-p tier_plugins.inspect_in_process`` with this folder on PYTHONPATH): vLLM's model
registry inspects model classes in this process instead of a fresh one.

vLLM inspects a model class (multimodal? pipeline parallel? ...) in a new
interpreter, ``registry._run_in_subprocess``, only so that the parent never
initialises CUDA. On this machine that is ~12 s of imports per class (target,
drafter, Kimi, MTP: up to a minute a run), paid again in every run: vLLM
caches the answer in one file per class, which the patched and unpatched runs
of a release overwrite in turn. Without CUDA there is nothing to protect, and
the same function gives the same answer here.
"""

from __future__ import annotations

import pytest


def pytest_configure(config):
    from vllm.model_executor.models import registry

    if not hasattr(registry, "_run_in_subprocess"):
        pytest.exit(f"vLLM's registry has no _run_in_subprocess: {registry.__file__}", 4)
    registry._run_in_subprocess = lambda fn: fn()
