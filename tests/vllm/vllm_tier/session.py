"""A session's inner runs: which runs each outer test of test_releases.py
needs for a release (``Session.start``), started on a pool as soon as what
they run is built, and their results, which the outer tests wait for.

When other tests run first in the session (``make test``), the runs are
started in a process of their own beside them (vllm_tier.background), which
saves what ran (``save``) for the tier's session fixture to ``load``. The
fixture starts, in line, whatever is not running or done yet (``make
test-vllm``: everything); what cannot be built fails only the outer tests
that need it."""

from __future__ import annotations

import json
import subprocess
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from vpatch.errors import VpatchError

from . import TierError, models, prepare, releases, runner, upstream

# vLLM's own tests that exercise the patched files and run on CPU, offline:
# the model registry imports every model class (deepseek_v2, kimi_k25, the
# EAGLE-3 heads) and checks their interfaces; DeepSeek's pipeline-parallel
# support is inspected in a subprocess.  tests/v1/spec_decode/* needs CUDA
# (its parametrisation raises "Unsupported platform" on CPU) or hub models.
UPSTREAM_TESTS = ("tests/models/test_registry.py",)
# The served speculative tests: a process of their own per mode and install.
SERVED_TESTS = "test_served_spec_decode.py"
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


class Session:
    """Every inner run of the session on a pool of runner.JOBS threads (each
    run also holds a runner slot while its process runs)."""

    def __init__(self, out: Path, fixtures_from: str):
        self.out = out
        self.fixtures_from = fixtures_from  # the release whose venv makes the fixtures
        self.pool = ThreadPoolExecutor(max_workers=runner.JOBS, thread_name_prefix="vllm-inner")
        self.runs: dict[tuple[str, str, str], Future] = {}
        self.errors: dict[tuple[str, str], str] = {}
        self.upstream_roots: dict[str, Path | None] = {}
        self._started: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def started(self, test: str, release: str) -> bool:
        with self._lock:
            return (test, release) in self._started

    def build_and_start(self, test: str, release: str) -> None:
        """Make what ``test`` needs for ``release`` (prepare.build) and start its
        runs; a failure to build is recorded for the outer test to report."""
        try:
            self.start(test, release, prepare.build(test, release))
        except (TierError, VpatchError, subprocess.CalledProcessError) as e:
            with self._lock:
                self.errors[test, release] = f"cannot prepare {test}: {e}"

    def start(self, test: str, release: str, made: dict) -> None:
        """Start the runs of ``test`` for ``release``; ``made`` is what
        prepare.build returned for them."""
        with self._lock:
            if (test, release) in self._started:
                return
            self._started.add((test, release))
        if test == "test_patch_effects":
            folder = self._folder(test, release)
            for variant in ("unpatched", "patched"):
                tokens = folder / f"{variant}-tokens.json"
                self._submit(
                    test, release, variant, extra_env={"VPATCH_VLLM_TOKENS_OUT": str(tokens)}
                )
        elif test == "test_served_speculative_decoding":
            for mode in releases.served_modes(release):
                # the compiled engine runs [cpu] only: no contract to switch
                env = {"VPATCH_VLLM_SERVED": mode}
                if mode == "compiled":
                    env["VPATCH_CUDA_CONTRACT"] = "0"
                for variant in ("unpatched", "patched"):
                    self._submit(
                        test,
                        release,
                        variant,
                        name=f"{mode}-{variant}",
                        key=f"{mode}-{variant}",
                        tests=(str(runner.INNER / SERVED_TESTS),),
                        # vLLM's deep tracebacks in full took ~100 s to write
                        # on a busy machine (the unpatched run fails 4 times)
                        pytest_args=("--tb=short",),
                        extra_env=env,
                        compiled=mode == "compiled",
                        # two engines (the plain one in a child) and, compiled,
                        # two compiles: a run took 4 min eager on a quiet
                        # machine, and over 15 on one loaded 10x over
                        timeout=runner.INNER_TIMEOUT * (3 if mode == "compiled" else 2),
                    )
        elif test == "test_fixes_no_selected_release_carries":
            markers = releases.fix_releases(releases.selected()).get(release, [])
            for variant in ("unpatched", "patched"):
                self._submit(
                    test, release, variant, select=("-m", " or ".join(markers) or "nothing")
                )
        elif test == "test_doctor_names_the_served_layers":
            # the patched install (doctor reads it with vpatch check); [cpu]
            # only: the aux layers an engine asks for do not depend on kernels
            self._submit(
                test,
                release,
                "patched",
                tests=(str(runner.INNER / SERVED_DOCTOR_TESTS),),
                pytest_args=("--tb=short",),
                extra_env={"VPATCH_VLLM_SERVED": "eager", "VPATCH_CUDA_CONTRACT": "0"},
                timeout=runner.INNER_TIMEOUT * 2,
            )
        elif test == "test_doctor_mla_drafters_served":
            # both installs, MLA on (target and drafter); [cpu] only, as above
            for variant in ("unpatched", "patched"):
                self._submit(
                    test,
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
        elif test == "test_cuda_contract_catches_an_aliasing_layer0_fix":
            self._submit(
                test,
                release,
                "aliasing",
                target=made["target"],
                tests=(str(runner.INNER / "test_aux_hidden_states.py"),),
                pytest_args=("-m", "layer0_fix"),
            )
        elif test == "test_series_own_tests_under_the_cuda_contract":
            tests = tuple(upstream.series_tests(releases.series_dir(release)))
            for variant in ("unpatched", "patched"):
                name = f"series-{variant}"
                self._submit_vllm_tests(test, release, variant, name, tests, made["rootdir"])
        elif test == "test_upstream_tests_on_patched_tree":
            root = self.upstream_roots[release] = made["rootdir"]
            if root is None:
                return
            self._submit_vllm_tests(
                test,
                release,
                "patched",
                "upstream",
                UPSTREAM_TESTS,
                root,
                ("-k", UPSTREAM_SELECT, "-o", "asyncio_default_fixture_loop_scope=function"),
            )

    def _submit_vllm_tests(
        self,
        test: str,
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
            test,
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

    def _folder(self, test: str, release: str) -> Path:
        return self.out / f"{release}-{test.removeprefix('test_')}"

    def _submit(self, test: str, release: str, variant: str, key: str | None = None, **kw) -> None:
        """Start one run; ``key`` names it among the test's runs (default: the
        variant)."""
        kw.setdefault("fixtures", models.ensure(self.fixtures_from))
        future = self.pool.submit(
            runner.run_inner, release, variant, self._folder(test, release), **kw
        )
        with self._lock:
            self.runs[test, release, key or variant] = future

    def result(self, test: str, release: str, variant: str) -> runner.InnerRun:
        if (test, release) in self.errors:
            pytest.fail(f"vLLM {release}: {self.errors[test, release]}", pytrace=False)
        return self.runs[test, release, variant].result()

    def finish(self) -> None:
        """Wait for every run."""
        self.pool.shutdown(wait=True)

    def stop(self) -> None:
        """Cancel the runs not started; wait for the running ones."""
        self.pool.shutdown(wait=True, cancel_futures=True)

    def save(self, path: Path) -> None:
        """What ran to the end (after ``finish``): the outer tests whose runs
        all finished, and those runs' exit, time and files (an outer test
        with a run that did not finish is left out whole, to run in line)."""
        done = {
            key: f.result()
            for key, f in self.runs.items()
            if f.done() and not f.cancelled() and f.exception() is None
        }
        complete = {
            (test, release)
            for test, release in self._started
            if all(key in done for key in self.runs if key[:2] == (test, release))
        }
        data = {
            "started": sorted(complete),
            "runs": [
                {
                    "test": test,
                    "release": release,
                    "key": key,
                    "variant": run.variant,
                    "returncode": run.returncode,
                    "seconds": run.seconds,
                    "junit": str(run.junit),
                    "log": str(run.log),
                }
                for (test, release, key), run in done.items()
                if (test, release) in complete
            ],
            "upstream_roots": {r: str(p) if p else None for r, p in self.upstream_roots.items()},
        }
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.rename(path)

    @classmethod
    def load(cls, path: Path, out: Path, fixtures_from: str) -> Session:
        """A session holding the runs ``save`` wrote (done), to start more in."""
        data = json.loads(path.read_text())
        s = cls(out, fixtures_from)
        s._started = {(test, release) for test, release in data["started"]}
        for r in data["runs"]:
            junit = Path(r["junit"])
            run = runner.InnerRun(
                r["release"],
                r["variant"],
                r["returncode"],
                r["seconds"],
                junit,
                Path(r["log"]),
                runner.parse_junit(junit),
            )
            f: Future = Future()
            f.set_result(run)
            s.runs[r["test"], r["release"], r.get("key", r["variant"])] = f
        s.upstream_roots = {r: Path(p) if p else None for r, p in data["upstream_roots"].items()}
        return s
