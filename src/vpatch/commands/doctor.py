"""`vpatch doctor`: an EAGLE-3 pair checked against what the environment's
vLLM release will do with it; the checks are deploy/doctor.py's."""

from __future__ import annotations

from ..deploy.doctor import Options, Report, run

__all__ = ["Options", "Report", "doctor"]


def doctor(
    target: str, drafter: str, python: str = "python3", opts: Options | None = None
) -> Report:
    """The report on the pair (target, drafter) for the vLLM of `python`."""
    return run(target, drafter, python=python, opts=opts)
