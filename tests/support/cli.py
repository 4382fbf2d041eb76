"""`vpatch ARGS` in a process of its own: the one helper every test runs the
CLI with, the unit and integration tests, the tier's outer tests and its inner
suite alike (standard library only, so a tier venv imports it too; the inner
suite has tests/ on its path, tests/vllm/release/pytest.ini).

A test that needs other stdio than captured text runs ``command()`` with
``environment()``. The environment is handled one way: the child's is this process's, with
``env``'s entries set over it, and an entry whose value is None taken out."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def environment(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment, ``env`` set over it (None: taken out)."""
    out = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def command(python: Path | str | None = None) -> list[str]:
    """The command line of vpatch under ``python`` (default: this
    interpreter), for a test that runs it with other stdio than captured
    text (a pipe, a terminal, a process to signal)."""
    return [str(python or sys.executable), "-m", "vpatch.cli"]


def vpatch(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    cwd: Path | str | None = None,
    python: Path | str | None = None,
    program: Sequence[str] | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``vpatch ARGS`` and capture its output as text: ``python -m
    vpatch.cli`` under ``python`` (default: this interpreter), or
    ``program`` (an installed ``vpatch`` script, say)."""
    cmd = [*program] if program else command(python)
    return subprocess.run(
        [*cmd, *args],
        env=environment(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
