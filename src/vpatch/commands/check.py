"""`vpatch check`: is the vLLM of a Python environment ready for EAGLE-3 with
DeepSeek-V3 / Kimi-K2.5 targets? (env/report.py finds out; `vpatch doctor`
asks the same.) The CLI prints `report.to_text()` or
`json.dumps(report.to_json())` and exits 0 when ready, 1 when not.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .. import lock
from ..env.report import Report, inspect


def check(
    python: str | os.PathLike[str] | None = None,
    say: Callable[[str], None] = lambda _: None,
    *,
    pins: lock.Lock,
) -> Report:
    """The report for python's vLLM (default: `python3` on PATH)."""
    return inspect(python, pins=pins, say=say)
