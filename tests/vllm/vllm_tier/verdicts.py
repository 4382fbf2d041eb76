"""Each check's verdict on a release, from the tier's results file: what
test_releases.py asserts (one outer test per check) and ``tier.py report``
prints. How a check's verdict is made is its definition's
(vllm_tier.checks); a verdict is a head line, table lines, the problems
(none: OK) and, for a check that cannot run, why it is skipped."""

from __future__ import annotations

from . import TierError
from .checks import CHECKS
from .registry import Verdict
from .results import Results


def verdict(res: Results, check: str, release: str) -> Verdict:
    """The verdict of ``check`` on ``release``; a check that could not be
    built or run has that as its one problem."""
    try:
        return CHECKS[check].verdict(res, release)
    except TierError as e:
        return Verdict(f"vLLM {release} {check}", bad=[str(e)])


def report(res: Results, full: bool = False) -> str:
    """Every check's verdict on every release it ran on (``full``: each
    table whole; else without the rows that are as expected)."""
    out = [f"patched-vLLM tier, {res.when}: {', '.join(res.selected)}"]
    for release, checks in res.plan.items():
        for check in checks:
            out.append(verdict(res, check, release).text(full))
    return "\n".join(out)
