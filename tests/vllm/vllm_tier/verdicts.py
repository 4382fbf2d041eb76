"""Each check's verdict on a release, from the tier's results file: what
test_releases.py asserts (one outer test per check) and ``tier.py report``
prints. A verdict is a head line, table lines, the problems (none: OK) and,
for a check that cannot run, why it is skipped."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from . import TierError, releases, runner, session, upstream
from .plan import ALIASING
from .results import Results


@dataclass
class Verdict:
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


def patch_effects(res: Results, release: str) -> Verdict:
    """Every patch_effect test failed unpatched as it declares and passed
    patched, in both kernel modes; every other test passed on both (gpu
    tests may skip); greedy generation gave the same tokens on both."""
    u = res.run("patch_effects", release, "unpatched")
    p = res.run("patch_effects", release, "patched")
    lines, bad = runner.compare(u, p)
    bad += _same_tokens(u, p)
    effects = [c for c in p.cases.values() if c.patch_effect]
    as_declared = sum(1 for c in effects if c.id in u.cases and u.cases[c.id].outcome == "xfailed")
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


def _served(res: Results, check: str, release: str, what: str) -> Verdict:
    """Each run of the served ``check`` (session.SERVED_RUNS): every served
    test failed unpatched as it declares and passed patched, in both kernel
    modes where the run has them."""
    lines, bad, heads = [], [], []
    for mode in session.served_modes(check, release):
        u = res.run(check, release, f"{mode}-unpatched")
        p = res.run(check, release, f"{mode}-patched")
        got, wrong = runner.compare(u, p)
        lines += [f"  [{mode}]" + line for line in got]
        bad += [f"[{mode}] {b}" for b in wrong]
        heads.append(f"{mode} {u.seconds:.0f}s/{p.seconds:.0f}s")
    return Verdict(f"vLLM {release} {what} (unpatched/patched run: {', '.join(heads)})", lines, bad)


def served_speculative_decoding(res: Results, release: str) -> Verdict:
    """EAGLE-3 served end to end by vLLM's CPU runner with a drafter asking for
    layer 0 (release/test_served_spec_decode.py; through cpu_spec_decode's
    stand-ins where release/stand_ins.py says), eager and, on releases.SERVED_COMPILED,
    compiled: each served test fails unpatched as it declares, with the error
    users met on that release (0.15-0.17: SpeculativeConfig refuses eagle3
    for the DeepSeek-V3 target; 0.18+: the upstream TypeError, wherever the
    release meets it), and passes patched, in both kernel modes when eager."""
    return _served(res, "served_speculative_decoding", release, "served EAGLE-3")


def served_kimi_k25_wrapper(res: Results, release: str) -> Verdict:
    """The KimiK25ForConditionalGeneration wrapper users serve, served with the
    same drafter (release/test_served_spec_decode.py with
    VPATCH_VLLM_SERVED_TARGET=kimi_k25): lossless, the drafter's states and
    drafts exact, the proposer's image_token_index the target's
    media_placeholder_token_id, the checkpoint's vision tower; each test
    fails unpatched as it declares and passes patched, in both kernel
    modes."""
    return _served(res, "served_kimi_k25_wrapper", release, "served the Kimi-K2.5 wrapper")


def served_at_tensor_parallel_2(res: Results, release: str) -> Verdict:
    """The tiny DeepSeek-V3 served with the drafter at tensor_parallel_size=2
    (release/test_served_spec_decode.py with VPATCH_VLLM_SERVED_TP=2: the
    ranks in processes vLLM spawns): lossless against the plain engine at TP
    1, each rank in the test's kernel mode; fails unpatched as it declares
    (0.18+: in the ranks) and passes patched."""
    return _served(res, "served_at_tensor_parallel_2", release, "served EAGLE-3 at TP 2")


def series_cut_short(res: Results, release: str) -> Verdict:
    """The series cut short to the first fixes users applied, one install per
    cut (releases.CUT_SHORT): each cut's run (release/test_series_cut_short.py)
    stops at engine start with the error users met there, raised by vLLM
    (release/unpatched.py's declaration of it): every test of every cut ran
    and passed."""
    lines, bad = [], []
    for cut, _ in releases.CUT_SHORT[release]:
        run = res.run("series_cut_short", release, cut)
        bad += _all_passed(run, f"{cut}: ")
        for c in run.cases.values():
            mark = "ok " if c.outcome == "passed" else "BAD"
            lines.append(f"  {mark} {cut} ({run.seconds:.0f}s run) {c.outcome:7s} {c.id}")
    return Verdict(f"vLLM {release} series cut short ({len(lines)} cases)", lines, bad)


def _all_passed(run: runner.InnerRun, label: str) -> list[str]:
    cases = run.cases.values()
    bad = [f"{label}{c.id}: {c.outcome} {c.message}" for c in cases if c.outcome != "passed"]
    if cases and run.crashed:
        bad.append(f"{label}run unusable: {run.crashed}\n{run.tail()}")
    if not cases:
        bad.append(f"{label}no test ran (exit {run.returncode}; log {run.log}):\n{run.tail()}")
    return bad


def doctor_names_the_served_layers(res: Results, release: str) -> Verdict:
    """The layers doctor says vLLM feeds the drafter are those the served
    engine asks the target for (release/test_doctor_served_layers.py: one
    engine per id-convention variant, on the patched install, a process of
    its own): every variant ran and passed."""
    run = res.run("doctor_names_the_served_layers", release, "patched")
    passed = sum(1 for c in run.cases.values() if c.outcome == "passed")
    return Verdict(
        f"vLLM {release} doctor vs the served engine's aux layers ({run.seconds:.0f}s): "
        f"{passed}/{len(run.cases)} variants agree",
        bad=_all_passed(run, ""),
    )


def doctor_mla_drafters_served(res: Results, release: str) -> Verdict:
    """doctor's verdict on Kimi-shaped MLA drafters against an engine serving
    them with MLA attention (release/test_served_mla_drafters.py: MLA on, a
    process of its own per install): every variant ran and passed on both
    installs (the verdict differs between them where the series fixes the
    drafter's MLA detection; the test reads which from the engine)."""
    lines, bad = [], []
    for variant in ("unpatched", "patched"):
        run = res.run("doctor_mla_drafters_served", release, variant)
        bad += _all_passed(run, f"{variant} ")
        passed = sum(1 for c in run.cases.values() if c.outcome == "passed")
        lines.append(
            f"  {variant} ({run.seconds:.0f}s): {passed}/{len(run.cases)} MLA drafters agree"
        )
    return Verdict(f"vLLM {release} doctor vs an engine serving MLA drafters", lines, bad)


def fixes_no_selected_release_carries(res: Results, release: str) -> Verdict:
    """A fix no selected release carries (0.22.x's fc_norm fix, by default)
    runs its patch-effect tests alone on the newest release that carries it
    (releases.fix_releases): each must fail unpatched as it declares and pass
    patched, in both kernel modes."""
    markers = releases.fix_releases(res.selected).get(release, [])
    u = res.run("fixes_no_selected_release_carries", release, "unpatched")
    p = res.run("fixes_no_selected_release_carries", release, "patched")
    lines, bad = runner.compare(u, p)
    if not any(c.patch_effect for c in p.cases.values()):
        bad.append(f"no patch-effect test of {', '.join(markers)} ran")
    head = f"vLLM {release} only the tests of {', '.join(markers)} (no selected release carries it)"
    return Verdict(head, lines, bad)


def cuda_contract_catches_an_aliasing_layer0_fix(res: Results, release: str) -> Verdict:
    """The mode bites. The old layer-0 fix (series/<release>-aliasing) hands
    the drafter the embedding tensor itself, which the decoder layer then uses
    as its residual: vLLM's CPU path leaves it alone, CUDA's
    fused_add_rms_norm overwrites it with embedding + attention output later
    in the forward. So every layer-0 test must pass in [cpu] and fail in
    [cuda], on the aux state check; the release's own series passes both
    (patch_effects)."""
    run = res.run("cuda_contract_catches_an_aliasing_layer0_fix", release, "aliasing")
    cpu = {c.id: c for c in run.cases.values() if c.kernels == "cpu"}
    cuda = {c.id: c for c in run.cases.values() if c.kernels == "cuda"}
    bad = [f"run unusable: {run.crashed}\n{run.tail()}"] if run.crashed else []
    bad += [f"{c.id}: {c.outcome} {c.message}" for c in cpu.values() if c.outcome != "passed"]
    bad += [
        f"{c.id}: {c.outcome} (expected to fail on the aux state) {c.message}"
        for c in cuda.values()
        if c.outcome != "failed" or "aux hidden state" not in c.message
    ]
    if not cpu or len(cpu) != len(cuda):
        bad.append(f"expected each layer-0 test in both modes, got {sorted(run.cases)}")
    head = (
        f"vLLM {release} with the aliasing layer-0 fix ({ALIASING[release].name}), "
        f"{run.seconds:.0f}s: {sum(c.outcome == 'passed' for c in cpu.values())}/{len(cpu)} "
        f"passed [cpu], {sum(c.outcome == 'failed' for c in cuda.values())}/{len(cuda)} failed "
        "[cuda]"
    )
    return Verdict(head, [f"    {c.id}: {c.outcome} {c.message}" for c in cuda.values()], bad)


def series_own_tests_under_the_cuda_contract(res: Results, release: str) -> Verdict:
    """The tests a series adds to vLLM's own test tree (the regression test
    that goes upstream with the fix) run from the patched sdist's tests/
    under the CUDA contract (-p cuda_contract): every one must fail on the
    unpatched install and pass on the patched one. These are vLLM's tests,
    without the inner suite's declared failures: failing unpatched includes
    failing to be collected (they import what the fix adds)."""
    sdir = releases.series_dir(release)
    files = upstream.series_tests(sdir) if sdir is not None else []
    u = res.run("series_own_tests_under_the_cuda_contract", release, "unpatched")
    p = res.run("series_own_tests_under_the_cuda_contract", release, "patched")
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
            bad.append(f"{cid}: expected fail -> pass, got unpatched={uo} patched={case.outcome}")
    if not outcomes:
        bad.append("the patched run collected no test")
    head = (
        f"vLLM {release}: the series' own tests ({', '.join(files)}) under the CUDA contract, "
        f"unpatched {u.seconds:.0f}s / patched {p.seconds:.0f}s"
    )
    return Verdict(head, outcomes, bad)


def upstream_tests_on_patched_tree(res: Results, release: str) -> Verdict:
    """vLLM's own registry tests (session.UPSTREAM_TESTS) from the release's
    sdist pass on the patched install, under the CUDA contract."""
    head = f"vLLM {release} patched: vLLM {upstream.tests_of(release)}'s own registry tests"
    check = "upstream_tests_on_patched_tree"
    if (check, release) not in res.errors and res.upstream_roots.get(release) is None:
        return Verdict(head, skip=f"no sdist of {upstream.tests_of(release)} in the lock")
    run = res.run(check, release, "patched")
    cases = run.cases.values()
    counts = {k: sum(1 for c in cases if c.outcome == k) for k in ("passed", "failed", "error")}
    head += f" [-k {session.UPSTREAM_SELECT}] in {run.seconds:.0f}s: " + ", ".join(
        f"{n} {k}" for k, n in counts.items() if n
    )
    bad = [f"run unusable: {run.crashed}\n{run.tail()}"] if run.crashed else []
    bad += [f"{c.id}: {c.outcome} {c.message}" for c in cases if c.outcome in ("failed", "error")]
    return Verdict(head, ["    " + " ".join(sorted(c.id.split("::")[-1] for c in cases))], bad)


VERDICTS: dict[str, Callable[[Results, str], Verdict]] = {
    "patch_effects": patch_effects,
    "served_speculative_decoding": served_speculative_decoding,
    "served_kimi_k25_wrapper": served_kimi_k25_wrapper,
    "served_at_tensor_parallel_2": served_at_tensor_parallel_2,
    "series_cut_short": series_cut_short,
    "doctor_names_the_served_layers": doctor_names_the_served_layers,
    "doctor_mla_drafters_served": doctor_mla_drafters_served,
    "fixes_no_selected_release_carries": fixes_no_selected_release_carries,
    "cuda_contract_catches_an_aliasing_layer0_fix": cuda_contract_catches_an_aliasing_layer0_fix,
    "series_own_tests_under_the_cuda_contract": series_own_tests_under_the_cuda_contract,
    "upstream_tests_on_patched_tree": upstream_tests_on_patched_tree,
}


def verdict(res: Results, check: str, release: str) -> Verdict:
    """The verdict of ``check`` on ``release``; a check that could not be
    built or run has that as its one problem."""
    try:
        return VERDICTS[check](res, release)
    except TierError as e:
        return Verdict(f"vLLM {release} {check}", bad=[str(e)])


def report(res: Results, full: bool = False) -> str:
    """Every check's verdict on every release it ran on (``full``: each
    table whole; else without the rows that are as expected)."""
    out = [f"patched-vLLM tier, {res.when}: {', '.join(res.selected)}"]
    for release, checks in res.plan.items():
        for check in checks:
            out.append(verdict(res, check, release).text(full))
    return "\n".join(out)
