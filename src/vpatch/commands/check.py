"""`vpatch check`: is the vLLM of a Python environment ready for EAGLE-3 with
DeepSeek-V3 / Kimi-K2.5 targets? (env/report.py finds out; `vpatch doctor`
asks the same.) The CLI prints `format_text(report)` or
`json.dumps(report.to_json())` and exits 0 when ready, 1 when not.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .. import lock
from ..env import status
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
    what = "EAGLE-3 for DeepSeek-V3 / Kimi-K2.5 targets"
    if r.eagle3_ready:
        lines.append(f"{what}: ready")
    else:
        lacking = [n for n, s in r.patches.items() if s not in status.READY]
        if any(r.patches[n] == "modified" for n in lacking):
            series = f"a file was changed by hand: reinstall vLLM, then run `{r.install}`"
        elif r.series:
            series = f"run `{r.install}`"
        else:
            series = f"vpatch has no series for vLLM {r.release}"
        lines.append(f"{what}: NOT ready ({', '.join(lacking)}); {series}")
    return "\n".join(lines)
