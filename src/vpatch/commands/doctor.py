"""`vpatch doctor`: check an EAGLE-3 drafter, its target and the serve
command against the serving environment's vLLM before a 1T model spends half
an hour loading. The engine is the library's (deploy/doctor.py); the CLI
prints the report as text or JSON and exits 0 (no error), 1 (an error) or 2
(bad input)."""

from __future__ import annotations

from ..deploy.checks import Report
from ..deploy.doctor import Request, run


def doctor(req: Request) -> Report:
    return run(req)
