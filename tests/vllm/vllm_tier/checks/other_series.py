"""Series other than the selected releases' own: a fix none of them carries,
run alone on the release that carries it, and two series broken on purpose
(tests/vllm/series), which the tests must catch: the CUDA contract an
aliasing layer-0 fix, the sampled served test a sampler that accepts every
draft."""

from __future__ import annotations

from pathlib import Path

from packaging.version import Version

from .. import TIER, releases, runner, targets
from ..registry import VARIANTS, Check, Job, Run, Verdict, check, run
from ..results import Results
from ..runner import INNER, INNER_TIMEOUT
from . import served
from .served import SERVED_TESTS


def _fixes(selected: list[str]) -> dict[str, list[str]]:
    """releases.fix_releases, but for the markers a served check runs."""
    return releases.fix_releases(selected, leave=served.served_markers())


@check
class FixesNoSelectedReleaseCarries(Check):
    """A fix no selected release carries (0.22.x's fc_norm fix, by default)
    runs its patch-effect tests alone on the newest release that carries it
    (releases.fix_releases): each must fail unpatched as it declares and pass
    patched, in both kernel modes."""

    name = "fixes_no_selected_release_carries"
    summary = "that fix's marker alone, both installs"

    def releases(self, selected: list[str]) -> list[str]:
        # the newest release that carries a fix no selected release carries
        return sorted(_fixes(selected), key=Version)

    def why_none(self, selected: list[str]) -> str:
        return "every marker of patches.toml is carried by a selected release"

    def runs(self, job: Job) -> list[Run]:
        markers = _fixes(list(job.selected)).get(job.release, [])
        return [run(v, select=("-m", " or ".join(markers) or "nothing")) for v in VARIANTS]

    def verdict(self, res: Results, release: str) -> Verdict:
        markers = _fixes(res.selected).get(release, [])
        u = res.run(self.name, release, "unpatched")
        p = res.run(self.name, release, "patched")
        lines, bad = runner.compare(u, p)
        if not any(c.patch_effect for c in p.cases.values()):
            bad.append(f"no patch-effect test of {', '.join(markers)} ran")
        head = (
            f"vLLM {release} only the tests of {', '.join(markers)} "
            "(no selected release carries it)"
        )
        return Verdict(head, lines, bad)


# Fixture series that must FAIL under the CUDA contract: layer-0 fixes whose aux
# state is the embedding tensor itself (series/<release>-aliasing).
ALIASING = {d.name.removesuffix("-aliasing"): d for d in (TIER / "series").glob("*-aliasing")}


@check
class CudaContractCatchesAnAliasingLayer0Fix(Check):
    """The mode bites. The old layer-0 fix (series/<release>-aliasing) hands
    the drafter the embedding tensor itself, which the decoder layer then uses
    as its residual: vLLM's CPU path leaves it alone, CUDA's
    fused_add_rms_norm overwrites it with embedding + attention output later
    in the forward. So every layer-0 test must pass in [cpu] and fail in
    [cuda], on the aux state check; the release's own series passes both
    (patch_effects)."""

    name = "cuda_contract_catches_an_aliasing_layer0_fix"
    summary = "the layer-0 tests on `series/<release>-aliasing`"

    def applies(self, release: str) -> bool:
        return release in ALIASING

    def why_none(self, selected: list[str]) -> str:
        return f"no selected release has an aliasing layer-0 fixture series ({', '.join(ALIASING)})"

    def build(self, release: str) -> Path:
        return targets.patched(release, ALIASING[release], label="aliasing")

    def runs(self, job: Job) -> list[Run]:
        return [
            run(
                "aliasing",
                target=job.made,
                tests=(str(INNER / "test_aux_hidden_states.py"),),
                pytest_args=("-m", "layer0_fix"),
            )
        ]

    def verdict(self, res: Results, release: str) -> Verdict:
        got = res.run(self.name, release, "aliasing")
        cpu = {c.id: c for c in got.cases.values() if c.kernels == "cpu"}
        cuda = {c.id: c for c in got.cases.values() if c.kernels == "cuda"}
        bad = [f"run unusable: {got.crashed}\n{got.tail()}"] if got.crashed else []
        bad += [f"{c.id}: {c.outcome} {c.message}" for c in cpu.values() if c.outcome != "passed"]
        bad += [
            f"{c.id}: {c.outcome} (expected to fail on the aux state) {c.message}"
            for c in cuda.values()
            if c.outcome != "failed" or "aux hidden state" not in c.message
        ]
        if not cpu or len(cpu) != len(cuda):
            bad.append(f"expected each layer-0 test in both modes, got {sorted(got.cases)}")
        head = (
            f"vLLM {release} with the aliasing layer-0 fix ({ALIASING[release].name}), "
            f"{got.seconds:.0f}s: {sum(c.outcome == 'passed' for c in cpu.values())}/{len(cpu)} "
            f"passed [cpu], {sum(c.outcome == 'failed' for c in cuda.values())}/{len(cuda)} "
            "failed [cuda]"
        )
        return Verdict(head, [f"    {c.id}: {c.outcome} {c.message}" for c in cuda.values()], bad)


# A deliberately broken random rejection per release, added to its series
# (series/<release>-sampler-accepts-every-draft.patch)
BROKEN_SAMPLER = {
    p.name.split("-", 1)[0]: p
    for p in (TIER / "series").glob("*-sampler-accepts-every-draft.patch")
}
# what the sampled test says when the distributions differ
NOT_THE_DISTRIBUTION = "not the plain engine's distribution"


@check
class SampledTestCatchesABrokenSampler(Check):
    """The sampled test bites. The release's series and a random rejection
    that accepts every draft, whatever the target's probability of it
    (series/<release>-sampler-accepts-every-draft.patch): served eager, the
    sampled test (test_served_sampled_is_the_targets_distribution) must fail
    on its test of the output distribution, where the release's own series
    passes it (served_speculative_decoding)."""

    name = "sampled_test_catches_a_broken_sampler"
    summary = (
        "the sampled served test: the series and "
        "`series/<release>-sampler-accepts-every-draft.patch`"
    )

    def applies(self, release: str) -> bool:
        return release in BROKEN_SAMPLER

    def why_none(self, selected: list[str]) -> str:
        return f"no selected release has a broken sampler to add ({', '.join(BROKEN_SAMPLER)})"

    def build(self, release: str) -> Path:
        return targets.with_patch(release, BROKEN_SAMPLER[release], "broken-sampler")

    def runs(self, job: Job) -> list[Run]:
        return [
            run(
                "broken-sampler",
                target=job.made,
                tests=(str(INNER / SERVED_TESTS),),
                pytest_args=("--tb=short", "-k", "sampled"),
                extra_env={"VPATCH_VLLM_SERVED": "eager"},
                timeout=INNER_TIMEOUT * 2,
            )
        ]

    def verdict(self, res: Results, release: str) -> Verdict:
        got = res.run(self.name, release, "broken-sampler")
        cases = list(got.cases.values())
        bad = [f"run unusable: {got.crashed}\n{got.tail()}"] if got.crashed else []
        if len(cases) != 1:
            bad.append(f"expected the sampled test alone, got {sorted(got.cases)}")
        bad += [
            f"{c.id}: {c.outcome} (expected to fail on the distribution) {c.message}"
            for c in cases
            if c.outcome != "failed" or NOT_THE_DISTRIBUTION not in c.message
        ]
        head = (
            f"vLLM {release} with a sampler that accepts every draft "
            f"({BROKEN_SAMPLER[release].name}), {got.seconds:.0f}s: "
            + ", ".join(f"{c.id.split('::')[-1]} {c.outcome}" for c in cases)
        )
        return Verdict(head, [f"    {c.id}: {c.outcome} {c.message[:300]}" for c in cases], bad)
