"""The tier program's inner runs: which runs each check needs on a release
(``Session.start``), started on a pool as soon as what they run is built, and
their results (``Session.results``). What cannot be built fails only the
checks that need it (recorded as their error)."""

from __future__ import annotations

import subprocess
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from vpatch.errors import VpatchError

from . import TierError, models, prepare, releases, runner, upstream
from .results import Results

# vLLM's own tests that exercise the patched files and run on CPU, offline:
# the model registry imports every model class (deepseek_v2, kimi_k25, the
# EAGLE-3 heads) and checks their interfaces; DeepSeek's pipeline-parallel
# support is inspected in a subprocess.  tests/v1/spec_decode/* needs CUDA
# (its parametrisation raises "Unsupported platform" on CPU) or hub models.
UPSTREAM_TESTS = ("tests/models/test_registry.py",)
# The served speculative tests: a process of their own per run and install.
SERVED_TESTS = "test_served_spec_decode.py"
# The served checks' runs of SERVED_TESTS and the environment of each: the
# tiny DeepSeek-V3 eager, and compiled on releases.SERVED_COMPILED (the
# compiled engine runs [cpu] only: no contract to switch, see the file); the
# KimiK25ForConditionalGeneration wrapper users serve; the tiny DeepSeek-V3
# at tensor_parallel_size=2.
SERVED_RUNS: dict[str, dict[str, dict[str, str]]] = {
    "served_speculative_decoding": {
        "eager": {"VPATCH_VLLM_SERVED": "eager"},
        "compiled": {"VPATCH_VLLM_SERVED": "compiled", "VPATCH_CUDA_CONTRACT": "0"},
    },
    "served_kimi_k25_wrapper": {
        "kimi": {"VPATCH_VLLM_SERVED": "eager", "VPATCH_VLLM_SERVED_TARGET": "kimi_k25"},
    },
    "served_at_tensor_parallel_2": {
        "tp2": {"VPATCH_VLLM_SERVED": "eager", "VPATCH_VLLM_SERVED_TP": "2"},
    },
}
# a series cut short: a process of its own per cut, on the cut's install
CUT_SHORT_TESTS = "test_series_cut_short.py"
# doctor against the served engine's aux layers: one engine per drafter, a
# process of its own (an engine torn down takes vLLM's parallel groups with it,
# which the main run's shared engine still needs).
SERVED_DOCTOR_TESTS = "test_doctor_served_layers.py"
# doctor against an engine serving MLA drafters with MLA attention: MLA on
# for the whole process (target and drafter), both installs.
SERVED_MLA_TESTS = "test_served_mla_drafters.py"
UPSTREAM_SELECT = (
    "test_registry_imports and (Deepseek or Kimi or Eagle3) or test_registry_is_pp and Deepseek"
)


def served_modes(check: str, release: str) -> list[str]:
    """The runs of the served ``check`` on ``release`` (SERVED_RUNS): each but
    "compiled" off releases.SERVED_COMPILED."""
    return [m for m in SERVED_RUNS[check] if m != "compiled" or release in releases.SERVED_COMPILED]


class Session:
    """Every inner run of a tier program run on a pool of runner.JOBS threads
    (each run also holds a runner slot while its process runs)."""

    def __init__(self, out: Path, selected: list[str], plan: dict[str, list[str]]):
        self.out = out
        self.selected = selected
        self.plan = plan
        # the first release's venv makes the fixtures
        self.fixtures_from = next(iter(plan), selected[0] if selected else "")
        self.pool = ThreadPoolExecutor(max_workers=runner.JOBS, thread_name_prefix="vllm-inner")
        self.runs: dict[tuple[str, str, str], Future] = {}
        self.errors: dict[tuple[str, str], str] = {}
        self.upstream_roots: dict[str, Path | None] = {}
        self._started: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def started(self, check: str, release: str) -> bool:
        with self._lock:
            return (check, release) in self._started

    def build_and_start(self, check: str, release: str) -> None:
        """Make what ``check`` needs for ``release`` (prepare.build) and start its
        runs; a failure to build is recorded as the check's error."""
        try:
            self.start(check, release, prepare.build(check, release))
        except (TierError, VpatchError, subprocess.CalledProcessError) as e:
            with self._lock:
                self._started.add((check, release))
                self.errors[check, release] = f"cannot prepare {check} of vLLM {release}: {e}"

    def start(self, check: str, release: str, made: dict) -> None:
        """Start the runs of ``check`` for ``release``; ``made`` is what
        prepare.build returned for them."""
        with self._lock:
            if (check, release) in self._started:
                return
            self._started.add((check, release))
        if check == "patch_effects":
            folder = self._folder(check, release)
            for variant in ("unpatched", "patched"):
                tokens = folder / f"{variant}-tokens.json"
                self._submit(
                    check, release, variant, extra_env={"VPATCH_VLLM_TOKENS_OUT": str(tokens)}
                )
        elif check in SERVED_RUNS:
            for mode in served_modes(check, release):
                for variant in ("unpatched", "patched"):
                    self._submit(
                        check,
                        release,
                        variant,
                        name=f"{mode}-{variant}",
                        key=f"{mode}-{variant}",
                        tests=(str(runner.INNER / SERVED_TESTS),),
                        # vLLM's deep tracebacks in full took ~100 s to write
                        # on a busy machine (the unpatched run fails 4 times)
                        pytest_args=("--tb=short",),
                        extra_env=SERVED_RUNS[check][mode],
                        compiled=mode == "compiled",
                        # two engines (the plain one in a child) and, compiled,
                        # two compiles: a run took 4 min eager on a quiet
                        # machine, and over 15 on one loaded 10x over
                        timeout=runner.INNER_TIMEOUT * (3 if mode == "compiled" else 2),
                    )
        elif check == "series_cut_short":
            # each cut on its own install; [cpu] only: the run stops at engine start
            for cut, target in made["targets"].items():
                self._submit(
                    check,
                    release,
                    "cut",
                    key=cut,
                    name=f"cut-{cut}",
                    target=target,
                    tests=(str(runner.INNER / CUT_SHORT_TESTS),),
                    pytest_args=("--tb=short",),
                    extra_env={"VPATCH_VLLM_CUT": cut, "VPATCH_CUDA_CONTRACT": "0"},
                )
        elif check == "fixes_no_selected_release_carries":
            markers = releases.fix_releases(self.selected).get(release, [])
            for variant in ("unpatched", "patched"):
                self._submit(
                    check, release, variant, select=("-m", " or ".join(markers) or "nothing")
                )
        elif check == "doctor_names_the_served_layers":
            # the patched install (doctor reads it with vpatch check); [cpu]
            # only: the aux layers an engine asks for do not depend on kernels
            self._submit(
                check,
                release,
                "patched",
                tests=(str(runner.INNER / SERVED_DOCTOR_TESTS),),
                pytest_args=("--tb=short",),
                extra_env={"VPATCH_VLLM_SERVED": "eager", "VPATCH_CUDA_CONTRACT": "0"},
                timeout=runner.INNER_TIMEOUT * 2,
            )
        elif check == "doctor_mla_drafters_served":
            # both installs, MLA on (target and drafter); [cpu] only, as above
            for variant in ("unpatched", "patched"):
                self._submit(
                    check,
                    release,
                    variant,
                    tests=(str(runner.INNER / SERVED_MLA_TESTS),),
                    pytest_args=("--tb=short",),
                    extra_env={
                        "VPATCH_VLLM_SERVED": "eager",
                        "VPATCH_CUDA_CONTRACT": "0",
                        "VLLM_MLA_DISABLE": "0",
                    },
                    timeout=runner.INNER_TIMEOUT * 2,
                )
        elif check == "cuda_contract_catches_an_aliasing_layer0_fix":
            self._submit(
                check,
                release,
                "aliasing",
                target=made["target"],
                tests=(str(runner.INNER / "test_aux_hidden_states.py"),),
                pytest_args=("-m", "layer0_fix"),
            )
        elif check == "series_own_tests_under_the_cuda_contract":
            tests = tuple(upstream.series_tests(releases.series_dir(release)))
            for variant in ("unpatched", "patched"):
                name = f"series-{variant}"
                self._submit_vllm_tests(check, release, variant, name, tests, made["rootdir"])
        elif check == "upstream_tests_on_patched_tree":
            root = self.upstream_roots[release] = made["rootdir"]
            if root is None:
                return
            self._submit_vllm_tests(
                check,
                release,
                "patched",
                "upstream",
                UPSTREAM_TESTS,
                root,
                ("-k", UPSTREAM_SELECT, "-o", "asyncio_default_fixture_loop_scope=function"),
            )

    def _submit_vllm_tests(
        self,
        check: str,
        release: str,
        variant: str,
        name: str,
        tests: tuple[str, ...],
        rootdir: Path,
        more: tuple[str, ...] = (),
    ) -> None:
        """A run of vLLM's own tests: in its test tree, under its conftest, no
        cache written there, under the CUDA contract, vLLM's registry
        inspecting in process, the tier's CPU workarounds installed (the
        plugins are on the run's PYTHONPATH, see vllm_tier.runenv)."""
        self._submit(
            check,
            release,
            variant,
            name=name,
            tests=tests,
            rootdir=rootdir,
            inifile=None,
            confcutdir=None,
            pytest_args=(
                *("-p", "no:cacheprovider", "-p", "cuda_contract", "-p", "inspect_in_process"),
                *("-p", "cpu_workarounds"),
                "-q",
                *more,
            ),
        )

    def _folder(self, check: str, release: str) -> Path:
        return self.out / f"{release}-{check}"

    def _submit(self, check: str, release: str, variant: str, key: str | None = None, **kw) -> None:
        """Start one run; ``key`` names it among the check's runs (default: the
        variant)."""
        kw.setdefault("fixtures", models.ensure(self.fixtures_from))
        future = self.pool.submit(
            runner.run_inner, release, variant, self._folder(check, release), **kw
        )
        with self._lock:
            self.runs[check, release, key or variant] = future

    def finish(self) -> None:
        """Wait for every run."""
        self.pool.shutdown(wait=True)

    def results(self) -> Results:
        """What ran (after ``finish``): every run that ended, and the error of
        each check that could not be built or whose run could not start."""
        when = datetime.now(timezone.utc).isoformat(timespec="seconds")
        out = Results(self.selected, self.plan, errors=dict(self.errors), when=when)
        for (check, release, key), future in self.runs.items():
            error = future.exception()
            if error is None:
                out.runs[check, release, key] = future.result()
            else:
                out.errors.setdefault((check, release), f"{key} run: {error}")
        out.upstream_roots = {r: str(p) if p else None for r, p in self.upstream_roots.items()}
        return out
