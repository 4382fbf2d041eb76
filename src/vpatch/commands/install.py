"""`vpatch install` and `vpatch uninstall`: the series into the vLLM of a
Python environment, and out again. env/install.py does the work (which
series, the journaled transaction, the receipt); the CLI prints the
`Result`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .. import lock
from ..env import install as engine
from ..env.install import Result


def install(
    python: str | os.PathLike[str] | None = None,
    series_dir: Path | None = None,
    dry_run: bool = False,
    say: Callable[[str], None] = lambda _: None,
    *,
    pins: lock.Lock,
) -> Result:
    """The release's series (or series_dir) into python's vLLM (default:
    `python3` on PATH)."""
    return engine.install(python, series_dir, dry_run=dry_run, pins=pins, say=say)


def uninstall(
    python: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    say: Callable[[str], None] = lambda _: None,
) -> Result:
    """Every file vpatch install replaced in python's vLLM, back as it was."""
    return engine.uninstall(python, dry_run=dry_run, say=say)
