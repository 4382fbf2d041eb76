"""Checks whose inner file (one of release/conftest.py's SERVED) starts the
engines it needs and says what each install must do, so that the verdict
is that every test ran and passed: the series cut short, doctor against the
layers a served engine asks for, and MLA drafters served."""

from __future__ import annotations

from pathlib import Path

from .. import releases, targets
from ..registry import VARIANTS, Check, Job, Run, Verdict, check, run
from ..results import Results
from ..runner import INNER, INNER_TIMEOUT, InnerRun
from .served import V1_ENV, V2_ENV, v2_defaults, v2_venv


def _all_passed(run: InnerRun, label: str) -> list[str]:
    cases = run.cases.values()
    bad = [f"{label}{c.id}: {c.outcome} {c.message}" for c in cases if c.outcome != "passed"]
    if cases and run.crashed:
        bad.append(f"{label}run unusable: {run.crashed}\n{run.tail()}")
    if not cases:
        bad.append(f"{label}no test ran (exit {run.returncode}; log {run.log}):\n{run.tail()}")
    return bad


@check
class SeriesCutShort(Check):
    """The series cut short to the first fixes users applied, one install per
    cut (releases.CUT_SHORT): each cut's run (release/test_series_cut_short.py)
    stops at engine start with the error users met there, raised by vLLM
    (release/unpatched.py's declaration of it): every test of every cut ran
    and passed."""

    name = "series_cut_short"
    summary = "`release/test_series_cut_short.py` per cut, on the cut's install"
    tests = "test_series_cut_short.py"

    def applies(self, release: str) -> bool:
        return release in releases.CUT_SHORT

    def why_none(self, selected: list[str]) -> str:
        return (
            "no selected release has a series cut short (releases.CUT_SHORT: "
            f"{', '.join(releases.CUT_SHORT)})"
        )

    def build(self, release: str) -> dict[str, Path]:
        """{cut: its install}"""
        return {cut: targets.cut_short(release, cut) for cut, _ in releases.CUT_SHORT[release]}

    def runs(self, job: Job) -> list[Run]:
        # each cut on its own install; [cpu] only: the run stops at engine start
        return [
            run(
                "cut",
                cut,
                name=f"cut-{cut}",
                target=target,
                tests=(str(INNER / self.tests),),
                pytest_args=("--tb=short",),
                extra_env={"VPATCH_VLLM_CUT": cut, "VPATCH_CUDA_CONTRACT": "0"},
            )
            for cut, target in job.made.items()
        ]

    def verdict(self, res: Results, release: str) -> Verdict:
        lines, bad = [], []
        for cut, _ in releases.CUT_SHORT[release]:
            got = res.run(self.name, release, cut)
            bad += _all_passed(got, f"{cut}: ")
            for c in got.cases.values():
                mark = "ok " if c.outcome == "passed" else "BAD"
                lines.append(f"  {mark} {cut} ({got.seconds:.0f}s run) {c.outcome:7s} {c.id}")
        return Verdict(f"vLLM {release} series cut short ({len(lines)} cases)", lines, bad)


@check
class DoctorNamesTheServedLayers(Check):
    """The layers doctor says vLLM feeds the drafter are those the served
    engine asks the target for (release/test_doctor_served_layers.py: one
    engine per id-convention variant, on the patched install, a process of
    its own), on the V1 runner and, where the tier serves on it, the V2
    runner (doctor asked with the runner the engine runs): every variant ran
    and passed."""

    name = "doctor_names_the_served_layers"
    summary = "`release/test_doctor_served_layers.py`, patched"
    # one engine per drafter, a process of its own (an engine torn down takes
    # vLLM's parallel groups with it, which the main run's shared engine
    # still needs)
    tests = "test_doctor_served_layers.py"

    def applies(self, release: str) -> bool:
        # not tried through the stand-ins: doctor reads the layers an engine
        # asks for, which the stand-ins do not touch
        return releases.serves_eagle3_natively(release)

    def why_none(self, selected: list[str]) -> str:
        return (
            "no selected release where vLLM's CPU runner serves "
            "EAGLE-3 by itself (not tried through the stand-ins, release/tier_plugins/stand_ins.py)"
        )

    def build(self, release: str) -> None:
        targets.patched(release)

    def _keys(self, release: str, selected: list[str]) -> list[str]:
        """The V1 runner's run where the release has one, and the V2 runner's
        where the tier serves on it (the runners read the drafter's ids
        differently); in the default set not on the other releases of the
        newest's venv (0.32.0: its V2 rules are 0.34.0's, which runs them),
        as the served checks."""
        v1 = ["patched"] * releases.has_v1_runner(release)
        v2 = releases.serves_v2(release) and not (
            releases.default_selected(selected) and release in v2_venv() - v2_defaults()
        )
        return [*v1, *(["patched-v2"] * v2)]

    def runs(self, job: Job) -> list[Run]:
        # the patched install (doctor reads it with vpatch check); [cpu]
        # only: the aux layers an engine asks for do not depend on kernels
        env = {"VPATCH_VLLM_SERVED": "eager", "VPATCH_CUDA_CONTRACT": "0"}
        return [
            run(
                "patched",
                key,
                name=key,  # its own log and junit report
                tests=(str(INNER / self.tests),),
                pytest_args=("--tb=short",),
                # the runner asked for as a user asks (doctor is asked with
                # the same): 0 picks V1, 1 V2 (redundant on 0.34.0, which
                # warns and starts: the engines show it)
                extra_env={**env, **(V2_ENV if key.endswith("-v2") else V1_ENV)},
                timeout=INNER_TIMEOUT * 2,
            )
            for key in self._keys(job.release, list(job.selected))
        ]

    def verdict(self, res: Results, release: str) -> Verdict:
        heads, bad = [], []
        for key in self._keys(release, res.selected):
            got = res.run(self.name, release, key)
            passed = sum(1 for c in got.cases.values() if c.outcome == "passed")
            runner_ = "V2" if key.endswith("-v2") else "V1"
            heads.append(f"{runner_} {passed}/{len(got.cases)} ({got.seconds:.0f}s)")
            bad += _all_passed(got, f"{runner_}: ")
        return Verdict(
            f"vLLM {release} doctor vs the served engine's aux layers, variants agreeing: "
            + ", ".join(heads),
            bad=bad,
        )


@check
class ServedMlaDrafters(Check):
    """A Kimi-shaped MLA drafter served with MLA attention
    (release/test_served_mla_drafters.py: MLA on, a process of its own per
    install), declared kimi_k2 and deepseek_v2: every variant ran and passed
    on both installs (lossless, the drafter's MLA layers running, vLLM's
    accepted counts those of the float64 reference), and the counts are the
    same for every declared type on both installs, whatever the draft model
    config said about MLA; vpatch doctor says ok of each pair, a warning
    where the draft config is not MLA."""

    name = "served_mla_drafters"
    summary = "`release/test_served_mla_drafters.py`, both installs, MLA on"
    tests = "test_served_mla_drafters.py"

    def applies(self, release: str) -> bool:
        return releases.serves_mla(release)

    def releases(self, selected: list[str]) -> list[str]:
        """In the default set the newest release it applies to (the draft
        config's MLA detection, whichever runner serves it); with VLLM=
        every selected release it applies to."""
        got = super().releases(selected)
        return got[-1:] if releases.default_selected(selected) else got

    def why_none(self, selected: list[str]) -> str:
        return (
            "no selected release serves EAGLE-3 with MLA attention on CPU by itself "
            f"(MLA from {releases.MLA_ON_CPU_FROM}; release/tier_plugins/stand_ins.py)"
        )

    def runs(self, job: Job) -> list[Run]:
        # both installs, MLA on (target and drafter); [cpu] only, as above
        return [
            run(
                v,
                tests=(str(INNER / self.tests),),
                pytest_args=("--tb=short",),
                extra_env={
                    "VPATCH_VLLM_SERVED": "eager",
                    "VPATCH_CUDA_CONTRACT": "0",
                    "VLLM_MLA_DISABLE": "0",
                },
                timeout=INNER_TIMEOUT * 2,
            )
            for v in VARIANTS
        ]

    def verdict(self, res: Results, release: str) -> Verdict:
        lines, bad, counts = [], [], set()
        for variant in VARIANTS:
            got = res.run(self.name, release, variant)
            bad += _all_passed(got, f"{variant} ")
            lines.append(f"  {variant} ({got.seconds:.0f}s):")
            for c in got.cases.values():
                p = c.props
                if "acceptance" in p:  # a test that failed has none
                    counts.add(p["acceptance"])
                declared = c.id.rsplit("[", 1)[-1].rstrip("]")
                if "doctor" in p:  # vpatch doctor's verdict on the pair served
                    lines.append(f"    {declared}: doctor {p['doctor']}")
                    continue
                lines.append(
                    f"    {declared}: {p.get('runner', '?')}, "
                    f"use_mla {p.get('use_mla')}, {p.get('acceptance')}"
                )
        if len(counts) > 1:
            bad.append(f"the accepted counts differ between the runs: {sorted(counts)}")
        return Verdict(f"vLLM {release} MLA drafters served, accepted drafts", lines, bad)
