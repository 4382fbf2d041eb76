"""vLLM's own tests, from a release's sdist: those its series adds to vLLM's
test tree (the regression tests that go upstream with the fixes), and the
model registry's."""

from __future__ import annotations

from pathlib import Path

from .. import TierError, releases, targets, upstream
from ..registry import VARIANTS, Check, Job, Run, Verdict, check, run
from ..results import Results


def _vllm_tests(
    variant: str, name: str, tests: tuple[str, ...], rootdir: Path, more: tuple[str, ...] = ()
) -> Run:
    """A run of vLLM's own tests: in its test tree, under its conftest, no
    cache written there, under the CUDA contract, vLLM's registry
    inspecting in process, the tier's CPU workarounds installed (the
    plugins are on the run's PYTHONPATH, see vllm_tier.runenv)."""
    return run(
        variant,
        name=name,
        tests=tests,
        rootdir=rootdir,
        inifile=None,
        confcutdir=None,
        pytest_args=(
            *("-p", "no:cacheprovider", "-p", "tier_plugins.cuda_contract"),
            *("-p", "tier_plugins.inspect_in_process", "-p", "tier_plugins.cpu_workarounds"),
            "-q",
            *more,
        ),
    )


@check
class SeriesOwnTestsUnderTheCudaContract(Check):
    """The tests a series adds to vLLM's own test tree (the regression test
    that goes upstream with the fix) run from the patched sdist's tests/
    under the CUDA contract (-p tier_plugins.cuda_contract): every one must fail on the
    unpatched install and pass on the patched one. These are vLLM's tests,
    without the inner suite's declared failures: failing unpatched includes
    failing to be collected (they import what the fix adds)."""

    name = "series_own_tests_under_the_cuda_contract"
    summary = "those tests from the patched sdist, both installs"

    def applies(self, release: str) -> bool:
        sdir = releases.series_dir(release)
        return sdir is not None and bool(upstream.series_tests(sdir))

    def releases(self, selected: list[str]) -> list[str]:
        """In the default set each series once (the same patch files, so the
        same tests), on the newest release it serves; with VLLM= every
        selected release it applies to."""
        got = super().releases(selected)
        if not releases.default_selected(selected):
            return got
        newest = {releases.pins().series(r).content_hash(): r for r in got}  # oldest first
        return [r for r in got if r in newest.values()]

    def why_none(self, selected: list[str]) -> str:
        return "no selected release's series adds a test to vLLM's own test tree"

    def build(self, release: str) -> Path:
        """The release's own tests with its series applied."""
        sdir = releases.series_dir(release)
        if sdir is None:
            raise TierError(f"{release} has no series")
        root = upstream.patched_tests(release, sdir)
        super().build(release)
        return root

    def runs(self, job: Job) -> list[Run]:
        sdir = releases.series_dir(job.release)
        assert sdir is not None, job.release  # build made its tests
        tests = tuple(upstream.series_tests(sdir))
        return [_vllm_tests(v, f"series-{v}", tests, job.made) for v in VARIANTS]

    def verdict(self, res: Results, release: str) -> Verdict:
        sdir = releases.series_dir(release)
        files = upstream.series_tests(sdir) if sdir is not None else []
        u = res.run(self.name, release, "unpatched")
        p = res.run(self.name, release, "patched")
        bad = [f"patched run unusable: {p.crashed}\n{p.tail()}"] if p.crashed else []
        # a collection error: pytest reports an error case and exits 2
        collection_error = u.returncode == 2 and any(c.outcome == "error" for c in u.cases.values())
        if u.crashed and not collection_error:
            bad.append(f"unpatched run unusable: {u.crashed}\n{u.tail()}")
        outcomes = []
        missing = "error" if collection_error else "missing"
        for cid, case in sorted(p.cases.items()):
            uo = u.cases[cid].outcome if cid in u.cases else missing
            outcomes.append(f"    {cid} {uo} -> {case.outcome}")
            if uo not in ("failed", "error") or case.outcome != "passed":
                bad.append(
                    f"{cid}: expected fail -> pass, got unpatched={uo} patched={case.outcome}"
                )
        if not outcomes:
            bad.append("the patched run collected no test")
        head = (
            f"vLLM {release}: the series' own tests ({', '.join(files)}) under the CUDA "
            f"contract, unpatched {u.seconds:.0f}s / patched {p.seconds:.0f}s"
        )
        return Verdict(head, outcomes, bad)


@check
class UpstreamTestsOnPatchedTree(Check):
    """vLLM's own registry tests (``TESTS``) from the release's sdist pass on
    the patched install, under the CUDA contract."""

    name = "upstream_tests_on_patched_tree"
    summary = "vLLM's registry tests, patched"
    # vLLM's own tests that exercise the patched files and run on CPU, offline:
    # the model registry imports every model class (deepseek_v2, kimi_k25, the
    # EAGLE-3 heads) and checks their interfaces; DeepSeek's pipeline-parallel
    # support is inspected in a subprocess.  tests/v1/spec_decode/* needs CUDA
    # (its parametrisation raises "Unsupported platform" on CPU) or hub models.
    TESTS = ("tests/models/test_registry.py",)
    SELECT = (
        "test_registry_imports and (Deepseek or Kimi or Eagle3) or test_registry_is_pp and Deepseek"
    )

    def applies(self, release: str) -> bool:
        # vLLM's registry tests where the series adds EAGLE-3 (0.15-0.17: new
        # interfaces and imports in several model files). A layer-0-only
        # series changes one expression that the inner suite runs for real,
        # and brings its own vLLM test (series_own_tests_under_the_cuda_contract).
        return releases.has_eagle3_series(release)

    def why_none(self, selected: list[str]) -> str:
        patched = releases.pins().versions("patched")
        return (
            "vLLM's registry tests run only for releases whose series adds EAGLE-3 "
            f"({patched[0]}-{patched[-1]})"
        )

    def build(self, release: str) -> Path | None:
        """vLLM's own tests (None: no sdist in the lock, and no run)."""
        root = upstream.ensure(release)
        if root is not None:
            targets.patched(release)
        return root

    def runs(self, job: Job) -> list[Run]:
        if job.made is None:
            return []
        more = ("-k", self.SELECT, "-o", "asyncio_default_fixture_loop_scope=function")
        return [_vllm_tests("patched", "upstream", self.TESTS, job.made, more)]

    def verdict(self, res: Results, release: str) -> Verdict:
        head = f"vLLM {release} patched: vLLM {upstream.tests_of(release)}'s own registry tests"
        if (self.name, release) not in res.errors and upstream.sdist(release) is None:
            return Verdict(head, skip=f"no sdist of {upstream.tests_of(release)} in the lock")
        got = res.run(self.name, release, "patched")
        cases = got.cases.values()
        counts = {k: sum(1 for c in cases if c.outcome == k) for k in ("passed", "failed", "error")}
        head += f" [-k {self.SELECT}] in {got.seconds:.0f}s: " + ", ".join(
            f"{n} {k}" for k, n in counts.items() if n
        )
        bad = [f"run unusable: {got.crashed}\n{got.tail()}"] if got.crashed else []
        bad += [
            f"{c.id}: {c.outcome} {c.message}" for c in cases if c.outcome in ("failed", "error")
        ]
        return Verdict(head, ["    " + " ".join(sorted(c.id.split("::")[-1] for c in cases))], bad)
