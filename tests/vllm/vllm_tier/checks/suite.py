"""The inner suite on the release's own series: its main runs, unpatched and
patched (the runs `vpatch pr --results` quotes), and a file of it kept out of
them, run the same way (DeepSeek-V3.2's decoder at tensor parallel 2)."""

from __future__ import annotations

import json

from .. import releases, runner
from ..registry import VARIANTS, Check, Job, Run, Verdict, check, run
from ..results import Results
from ..runner import INNER, InnerRun


@check
class PatchEffects(Check):
    """Every patch_effect test failed unpatched as it declares and passed
    patched, in both kernel modes; every other test passed on both (gpu
    tests may skip); greedy generation gave the same tokens on both."""

    name = "patch_effects"
    summary = "the inner suite, unpatched and patched"
    quoted = True

    def why_none(self, selected: list[str]) -> str:
        return "no release selected"

    def runs(self, job: Job) -> list[Run]:
        return [
            run(v, extra_env={"VPATCH_VLLM_TOKENS_OUT": str(job.folder / f"{v}-tokens.json")})
            for v in VARIANTS
        ]

    def verdict(self, res: Results, release: str) -> Verdict:
        u = res.run(self.name, release, "unpatched")
        p = res.run(self.name, release, "patched")
        lines, bad = runner.compare(u, p)
        bad += self._same_tokens(u, p)
        effects = [c for c in p.cases.values() if c.patch_effect]
        as_declared = sum(
            1 for c in effects if c.id in u.cases and u.cases[c.id].outcome == "xfailed"
        )
        others = [c for c in p.cases.values() if not c.patch_effect]
        n_skip = sum(1 for c in others if c.outcome == "skipped")
        contract = sum(1 for c in p.cases.values() if c.kernels == "cuda")
        head = (
            f"vLLM {release}: unpatched run {u.seconds:.0f}s, patched run {p.seconds:.0f}s; "
            f"{len(effects)} patch-effect tests: {as_declared} failed unpatched as declared, "
            f"{sum(1 for c in effects if c.outcome == 'passed')} passed patched; "
            f"{len(others)} other tests: {sum(1 for c in others if c.outcome == 'passed')} "
            f"passed patched{f', {n_skip} skipped (gpu)' if n_skip else ''}; "
            f"{contract} of all these ran under the CUDA contract [cuda]"
        )
        return Verdict(head, lines, bad)

    @staticmethod
    def _same_tokens(u: InnerRun, p: InnerRun) -> list[str]:
        """With no aux layers the patched release generates exactly what the
        unpatched one does (greedy, same checkpoint): each run's
        test_greedy_generation_is_deterministic wrote its tokens."""
        files = [r.log.parent / f"{r.variant}-tokens.json" for r in (u, p)]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            return [f"no greedy tokens written: {', '.join(missing)}"]
        want, got = (json.loads(f.read_text()) for f in files)
        if want != got:
            return ["greedy tokens differ between the unpatched and the patched release"]
        return []


@check
class DeepseekV32AuxAtTensorParallel2(Check):
    """DeepSeek-V3.2's own decoder (vllm/models/deepseek_v32, the nvidia and
    the amd module) at tensor parallel 2 over gloo and at TP 1, ranks of
    their own (release/test_deepseek_v32_aux_tp.py), on both installs: every
    patch_effect test failed unpatched as it declares and passed patched, in
    both kernel modes; the premise passed on both."""

    name = "deepseek_v32_aux_at_tensor_parallel_2"
    summary = "`release/test_deepseek_v32_aux_tp.py`, both installs"
    marker = "v32_tp_aux"
    tests = releases.APART[marker]

    def applies(self, release: str) -> bool:
        return self.marker in releases.markers_of(release)

    def releases(self, selected: list[str]) -> list[str]:
        """In the default set the newest release it applies to (a vLLM
        process a run besides the run's own: the variants of the fix are
        the same change, and the series' own vLLM test runs on the others,
        series_own_tests_under_the_cuda_contract); with VLLM= every selected
        release it applies to."""
        got = super().releases(selected)
        return got[-1:] if releases.default_selected(selected) else got

    def why_none(self, selected: list[str]) -> str:
        return f"no selected release's series carries the fix of marker {self.marker}"

    def runs(self, job: Job) -> list[Run]:
        return [
            run(
                v,
                tests=(str(INNER / self.tests),),
                pytest_args=("--tb=short",),
                extra_env={"VPATCH_VLLM_RANKS": "1"},
            )
            for v in VARIANTS
        ]

    def verdict(self, res: Results, release: str) -> Verdict:
        u = res.run(self.name, release, "unpatched")
        p = res.run(self.name, release, "patched")
        lines, bad = runner.compare(u, p)
        effects = [c for c in p.cases.values() if c.patch_effect]
        if not effects:
            bad.append(f"no patch-effect test of {self.marker} ran")
        head = (
            f"vLLM {release} DeepSeek-V3.2's decoder at TP 2: unpatched {u.seconds:.0f}s, "
            f"patched {p.seconds:.0f}s; {len(effects)} patch-effect tests"
        )
        return Verdict(head, lines, bad)
