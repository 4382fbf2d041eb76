"""`vpatch check`: is the vLLM of a Python environment ready for EAGLE-3 with
DeepSeek-V3 / Kimi-K2.5 targets? (env/report.py finds out; `vpatch doctor`
asks the same.) The CLI prints `format_text(report)` or
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


def format_text(r: Report) -> str:
    lines = [f"{r.dist} {r.version} at {r.location}" + (" (editable)" if r.editable else "")]
    lines.append(f"  python     {r.python}")
    if r.recovered:
        lines.append(f"  recovered  {r.recovered}")
    if r.installed:
        lines.append(f"  installed  {r.installed}")
    width = max((len(v) for v in r.patches.values()), default=8)
    for name, st in r.patches.items():
        lines.append(f"  {st:{width}}  {name}")
    for note in r.notes:
        lines.append(f"  note: {note}")
    lines.append(r.verdict)  # the one answer, as install and doctor give it
    return "\n".join(lines)
