"""The registry of the tier's checks: what a check is and how it is
registered, nothing that is registered (the checks: vllm_tier.checks).

A check is one verdict per release, made from one or more inner runs. Its
definition is a class with ``@check`` on it: its ``name`` (the outer test
is ``test_<name>[release]``, its docstring the test's), the releases it
applies to among the selected ones and why none (``releases``,
``why_none``; or only ``applies``), what it builds for a release
(``build``: both installs unless it says otherwise), its runs on a
release (``runs``: one ``Run`` each, the keyword arguments of
runner.run_inner), and its verdict on the results (``verdict``). The plan
(plan.py), the builds (prepare.py), the runs (session.py), the verdicts
(verdicts.py) and the outer tests (test_releases.py) read ``CHECKS`` as
vllm_tier.checks fills it, in the order it defines the checks.
CONTRIBUTING.md ("Add a tier check") says the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from . import targets
from .results import Results

VARIANTS = ("unpatched", "patched")


@dataclass
class Verdict:
    """A check's verdict on a release: a head line, table lines, the problems
    (none: OK) and, for a check that cannot run, why it is skipped."""

    head: str
    lines: list[str] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)
    skip: str | None = None

    def text(self, full: bool = True) -> str:
        """The head, its state and the table (``full``: with the rows that
        are as expected)."""
        if self.skip:
            state = "SKIPPED: " + self.skip
        else:
            state = "OK" if not self.bad else f"{len(self.bad)} PROBLEM(S)"
        rows = self.lines if full else [r for r in self.lines if not _AS_EXPECTED.match(r)]
        return "\n".join([f"{self.head}: {state}", *rows])


# a row of runner.compare's table that is as expected (served: "[mode]" first)
_AS_EXPECTED = re.compile(r"\s*(\[\w+\])?\s*ok\s")


@dataclass(frozen=True)
class Run:
    """One inner run of a check on a release: ``runner.run_inner(release,
    variant, <its folder>, **options)``, named ``key`` among the check's runs
    (the results file's key)."""

    key: str
    variant: str  # unpatched | patched | the install's label
    options: dict[str, Any] = field(default_factory=dict)


def run(variant: str, key: str | None = None, **options: Any) -> Run:
    """A Run named ``key`` (default: the variant)."""
    return Run(key or variant, variant, options)


@dataclass(frozen=True)
class Job:
    """A check on one release in a tier program run: what its runs are made
    of."""

    release: str
    selected: tuple[str, ...]  # the program's selected releases
    folder: Path  # its runs' logs, junit reports and what they write
    made: Any  # what the check's build returned


class Check:
    """The shape of a check's definition (see the module's docstring); the
    defaults are those most checks share."""

    name: ClassVar[str]
    summary: ClassVar[str]  # what runs, in a phrase (tests/vllm/README.md's table)
    # its runs' passed and failed tests are what `vpatch pr --results` quotes
    # (results.json's "releases"): the check whose runs are each release's
    # main runs (one check)
    quoted: ClassVar[bool] = False

    def applies(self, release: str) -> bool:
        """The check runs on ``release`` when it is selected."""
        return True

    def releases(self, selected: list[str]) -> list[str]:
        """The releases the check runs on, for the ``selected`` ones."""
        return [r for r in selected if self.applies(r)]

    def why_none(self, selected: list[str]) -> str:
        """Why it runs on none of the ``selected`` releases (the reason its
        outer test is skipped)."""
        raise NotImplementedError

    def build(self, release: str) -> Any:
        """Make what the runs need on ``release``; what they use (Job.made)."""
        targets.unpatched(release)
        targets.patched(release)

    def runs(self, job: Job) -> list[Run]:
        raise NotImplementedError

    def verdict(self, res: Results, release: str) -> Verdict:
        raise NotImplementedError


CHECKS: dict[str, Check] = {}


def check(cls: type[Check]) -> type[Check]:
    """Register the check ``cls`` defines (once: a name is one check)."""
    if cls.name in CHECKS:
        raise TypeError(f"two checks named {cls.name!r}")
    if not (cls.__doc__ or "").strip():
        raise TypeError(f"check {cls.name!r} has no docstring (its outer test's)")
    CHECKS[cls.name] = cls()
    return cls
