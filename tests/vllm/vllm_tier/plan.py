"""Which checks run on which releases: for a selection of releases, each
check's releases (those it applies to), or why none of them (the checks'
own rules: vllm_tier.checks).

A check is one verdict per release, made from one or more inner runs: the
tier program (tests/vllm/tier.py) builds and runs what the plan asks for,
and test_releases.py has one outer test per check (``test_<check>``),
parametrized by the same plan."""

from __future__ import annotations

from . import TierError
from .checks import CHECKS


def plan(selected: list[str]) -> dict[str, list[str]]:
    """{release: [checks]}: the selected releases first, in their order,
    then any other a check runs on (fixes_no_selected_release_carries), each
    release's checks in the order of CHECKS."""
    out: dict[str, list[str]] = {r: [] for r in selected}
    for name, check in CHECKS.items():
        for release in check.releases(selected):
            out.setdefault(release, []).append(name)
    return {r: checks for r, checks in out.items() if checks}


def why_none(check: str, selected: list[str]) -> str:
    """Why ``check`` runs on none of the ``selected`` releases."""
    return CHECKS[check].why_none(selected)


def only(wanted: dict[str, list[str]], names: list[str]) -> dict[str, list[str]]:
    """The plan `wanted` cut to the checks `names` (``tier.py run --check``),
    each release left with those of its checks; a name no check has is bad
    input."""
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise TierError(f"no check named {', '.join(unknown)} (the checks: {', '.join(CHECKS)})")
    cut = {r: [c for c in checks if c in names] for r, checks in wanted.items()}
    return {r: checks for r, checks in cut.items() if checks}
