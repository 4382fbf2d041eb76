"""The tiny model fixtures: tests/vllm/fixtures.py run in a tier venv (it needs
torch, safetensors, tokenizers), kept under ``fixtures/<hash of fixtures.py>``."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from . import TIER, cache, venvs
from .log import run


def ensure(release: str) -> Path:
    """The fixture folder, made with the venv of ``release`` (the checkpoints
    are plain safetensors: any torch of the tier makes the same files)."""
    src = TIER / "fixtures.py"
    key = hashlib.sha256(src.read_bytes()).hexdigest()[:12]
    return cache.built(
        cache.root() / "fixtures" / key,
        key,
        # The venv is asked for only to make them: made, the fixtures serve a
        # release whose venv is still being built (prepare.ahead). Bytecode
        # goes into the runs' own tree (see runenv), not into the venv.
        lambda out: run(
            [venvs.ensure(release), src, "--out", out],
            env={**os.environ, "PYTHONPYCACHEPREFIX": str(cache.root() / "pycache")},
        ),
        "the tiny model fixtures",
        # No pruning: checkouts that share the cache (worktrees of branches
        # with different fixtures.py) run side by side, and pruning deleted
        # the fixtures under another checkout's running session. Each is 3 MB.
    )
