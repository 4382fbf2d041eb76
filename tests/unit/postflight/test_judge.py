"""postflight/judge.py: the figures of a server's counters and what doctor
flags in them, each with its reason; the series of the server's release;
the server against the deployment tied to it; the report, text and JSON."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from support import next_release
from support import vllm_server as V
from vpatch import lock
from vpatch.doctor.environment import UNKNOWN, Readiness
from vpatch.doctor.report import Finding, Report
from vpatch.doctor.serve import from_options
from vpatch.postflight import judge as P
from vpatch.postflight.server import Card, Counters, Reading, Watch

M = V.MODEL
REL = V.NEWEST  # the server's release, where it does not matter


def watch(*counters: Counters, interval: int = 10, cards=(), url="http://h:1") -> Watch:
    """A server read once (one Counters) or twice `interval` seconds apart."""
    reads = [Reading(url, REL, tuple(cards), {(M, "0"): c}) for c in counters]
    return Watch(reads[0], reads[1] if len(reads) > 1 else None, interval if reads[1:] else None)


def only(findings: list[Finding], check: str) -> Finding:
    (f,) = [f for f in findings if f.check == check]
    return f


def severities(findings: list[Finding]) -> dict[str, str]:
    return {f.check: f.severity for f in findings}


def counters(drafts: int, per_position: tuple[int, ...], k: int = 3, extra: int = 50) -> Counters:
    """Counters of `drafts` drafts of k tokens accepted so per position, with
    requests enough that what was decoded is known (8 requests done)."""
    accepted = sum(per_position)
    return Counters(drafts, drafts * k, accepted, per_position, 8 + drafts + accepted + extra, 8, 0)


def test_the_figures_are_vllms():
    """SpecDecodingProm's docstring: rate = accepted / draft tokens, mean
    length = 1 + accepted / drafts, per position = per_pos / drafts."""
    f = P.Figures(V.WORKING)
    assert f.rate == pytest.approx(651 / 1503) and round(f.rate, 3) == 0.433
    assert f.length == pytest.approx(1 + 651 / 501) and round(f.length, 2) == 2.30
    assert f.per_position == pytest.approx((301 / 501, 211 / 501, 139 / 501))
    assert f.conditional == pytest.approx((211 / 301, 139 / 211))
    assert f.decoded == 1160 - 8 - 0
    empty = P.Figures(Counters(per_position=(0, 0)))
    assert (empty.rate, empty.length, empty.per_position, empty.conditional) == (
        None,
        None,
        (),
        (None,),
    )
    assert P.Figures(Counters(generated=10, finished=2)).decoded is None  # running unknown
    assert P.Figures(Counters(generated=3, finished=2, running=4)).decoded == 0


def test_the_thresholds_derive_from_their_source_figure():
    """Position 0's floor comes from the public figure (acceptance never
    rises with the position, so position 0's is at least the mean), and the
    tier's trained pair (support.vllm_server.WORKING: its measured totals,
    docs/measurements.md) is a working pair by it, whatever its split."""
    assert pytest.approx((P.PUBLIC_LENGTH - 1) / P.PUBLIC_K) == P.WORKING_P0
    assert pytest.approx(P.FAR * P.WORKING_P0) == P.LOW_P0
    f = P.Figures(V.WORKING)
    assert f.per_position[0] >= sum(f.per_position) / len(f.per_position) > P.LOW_P0


def test_a_working_pair_is_flagged_for_nothing():
    found = P.judge(watch(V.WORKING))
    assert severities(found) == {"position0": "info", "decay": "info"}
    assert only(found, "position0").message == (
        "position 0 accepts 0.601 of 501 drafts since the server started; doctor flags under "
        "0.267, half of 0.533: the least position 0 accepts at the lowest public mean "
        "acceptance length for these targets, 2.6 at k = 3 (docs/doctor.md)"
    )
    assert only(found, "decay").message == (
        "conditional acceptance after position 0: 0.701 0.659; none under 0.5 x position 0's"
    )


@pytest.mark.parametrize(("p0", "flagged"), [(26, True), (27, False)])
def test_position_0_far_below_a_working_pair(p0, flagged):
    """26 of 100 (under 0.267) is flagged, 27 is not: the threshold, not a
    figure tuned to the case."""
    found = P.judge(watch(counters(100, (p0, p0 // 2, p0 // 4))))
    f = only(found, "position0")
    assert f.severity == ("warning" if flagged else "info")
    if flagged:
        assert f.message.startswith(
            f"position 0 accepts 0.{p0}0 of 100 drafts since the server started, far below a "
            "working pair (doctor flags under 0.267"
        )
        assert "aux layer ids one off or in another order" in f.message
        assert f.message.endswith(
            "; tie the server to its deployment (`-- vllm serve ...`, or --target/--drafter) "
            "for the config facts that explain it"
        )
        assert "decay" not in severities(found)  # position 0 is the finding


IMPOSSIBLE = {
    # the three: an acceptance rate of 333.3; per position 0.1 -> 0.9 -> 1000;
    # more drafts than draft tokens; and position 0 accepted in more drafts than there are
    "rate over 1": (Counters(300, 3, 1000, (100, 100, 100)), "1000 accepted of 3 draft tokens"),
    "rising": (
        Counters(1000, 3000, 1000, (100, 900, 1000000)),
        "position 1 accepted in 900 drafts, position 0 in 100",
    ),
    "drafts over tokens": (Counters(500, 100, 60, (30, 20, 10)), "500 drafts of 100 draft tokens"),
    "position 0 over drafts": (Counters(200, 600, 400, (300, 80, 20)), "300 drafts of 200"),
}


@pytest.mark.parametrize("case", IMPOSSIBLE)
def test_impossible_counters_are_said_and_not_judged(case):
    """Counts vLLM cannot give (it counts them together,
    SpecDecodingStats.observe_draft) were judged without comment: a verdict
    built on them. Now one finding says they are inconsistent, and none is
    built on them."""
    c, why = IMPOSSIBLE[case]
    found = P.judge(watch(replace(c, generated=5000, finished=8, running=0)))
    assert [(f.check, f.severity) for f in found] == [("counters", "warning")], found
    assert why in found[0].message, found[0].message
    assert "doctor judges nothing on them" in found[0].message


def preflight(*findings: Finding) -> Report:
    runner = Finding(
        "model_runner", "info", "vLLM R serves the pair on its V1 runner (the default)"
    )
    return Report([*findings, runner], "vllm serve t")


def test_the_preflight_says_what_explains_it():
    """Tied to a deployment: the preflight's target-side findings that are
    not info (layer ids, norms...), and the runner; drafter-side ones for a
    decay."""
    pre = preflight(
        Finding("trained_layers", "error", "one layer off"),
        Finding("aux_layers", "info", "fed [2, 30, 58]"),
        Finding("rope", "warning", "no rope_theta"),
        Finding("vocab", "error", "not ours"),
    )
    low = only(P.judge(watch(counters(200, (20, 10, 5))), pre), "position0").message
    assert low.endswith(
        "; the deployment's preflight (above) finds: trained_layers (error); vLLM R "
        "serves the pair on its V1 runner (the default)"
    )
    decay = only(P.judge(watch(counters(200, (180, 40, 10))), pre), "decay").message
    assert "; the deployment's preflight (above) finds: rope (warning); vLLM R" in decay
    clean = only(P.judge(watch(counters(200, (20, 10, 5))), preflight()), "position0").message
    assert "; the deployment's preflight (above) finds nothing that explains it; vLLM" in clean


@pytest.mark.parametrize(
    ("per_position", "flagged_at"),
    [
        ((180, 40, 10), 1),  # 40/180 = 0.22 < 0.5 x 0.9
        ((180, 150, 20), 2),  # 20/150 = 0.13
        ((180, 82, 40), None),  # 82/180 = 0.456 > 0.45, 40/82 = 0.49 > 0.45
        ((180, 80, 39), 1),  # 80/180 = 0.444 < 0.45
        ((180, 90, 0), None),  # 90 accepted up to position 1: under SAMPLE, not judged
    ],
)
def test_a_decay_that_points_at_the_drafter(per_position, flagged_at):
    found = P.judge(watch(counters(200, per_position)))
    f = only(found, "decay")
    assert only(found, "position0").severity == "info"
    if flagged_at is None:
        assert f.severity == "info"
        return
    assert f.severity == "warning"
    assert f.message.startswith(f"position {flagged_at} accepts ")
    assert "under 0.5 x position 0's 0.900, while position 0 holds" in f.message
    assert "runs on the drafter's own hidden state, not the target's" in f.message


def test_no_drafts_at_all():
    """Not one draft while at least SAMPLE tokens were decoded: an error; too
    few decoded, or no way to tell: not judged."""
    none = Counters(0, 0, 0, (0, 0, 0), generated=8 + 100, finished=8, running=0)
    f = only(P.judge(watch(none)), "drafts")
    assert f.severity == "error"
    assert f.message.startswith(
        "no drafts at all since the server started, while at least 100 tokens were decoded"
    )
    few = Counters(0, 0, 0, (0, 0, 0), generated=8 + 99, finished=8, running=0)
    assert only(P.judge(watch(few)), "drafts").severity == "info"
    # a running request's first token came from its prefill too
    running = Counters(0, 0, 0, (0, 0, 0), generated=8 + 99, finished=4, running=4)
    assert only(P.judge(watch(running)), "drafts").severity == "info"
    assert only(P.judge(watch(replace(running, running=3))), "drafts").severity == "error"
    blind = Counters(0, 0, 0, (0, 0, 0))
    assert "to tell whether a request was decoded" in only(P.judge(watch(blind)), "drafts").message
    assert [f.check for f in P.judge(watch(counters(99, (50, 20, 5))))] == ["drafts"]


def test_the_window_is_judged_when_it_has_enough():
    """A working start, then a window where position 0 collapsed: the window
    is judged; a window of too few drafts leaves the start judged; a window
    where drafting stopped is judged too."""
    start = counters(500, (300, 210, 140))
    bad = Counters(
        start.drafts + 200,
        start.draft_tokens + 600,
        start.accepted + 20,
        tuple(a + d for a, d in zip(start.per_position, (20, 0, 0), strict=True)),
        start.generated + 220 + 10,
        start.finished + 10,
        0,
    )
    f = only(P.judge(watch(start, bad)), "position0")
    assert f.severity == "warning" and "accepts 0.100 of 200 drafts over the last 10s" in f.message
    few = Counters(start.drafts + 5, start.draft_tokens + 15, start.accepted, start.per_position)
    f = only(P.judge(watch(start, few)), "position0")
    assert "since the server started (the 10s window has 5, too few)" in f.message
    stopped = Counters(
        start.drafts, start.draft_tokens, start.accepted, start.per_position,
        start.generated + 300, start.finished + 5, 1,
    )  # fmt: skip
    f = only(P.judge(watch(start, stopped)), "drafts")
    assert f.severity == "error" and "no drafts at all over the last 10s" in f.message


def test_a_restart_between_the_reads():
    found = P.judge(watch(counters(500, (300, 210, 140)), counters(120, (70, 50, 30))))
    assert only(found, "window").severity == "warning"
    assert "went back between the two reads" in only(found, "window").message
    assert "since the server started" in only(found, "position0").message


def test_a_fleet_and_several_models_name_their_own():
    w = Watch(Reading("http://h:2", REL, (), {(M, "0"): V.WORKING, ("b", "0"): V.WORKING}))
    msgs = [f.message for f in P.judge(w, fleet=True)]
    assert {m.split(": ")[0] + ": " + m.split(": ")[1] for m in msgs} == {
        f"http://h:2: {M}",
        "http://h:2: b",
    }
    assert not P.judge(watch(V.WORKING))[0].message.startswith("http")


@pytest.fixture(scope="module")
def pins():
    return lock.load()


def test_the_series_of_the_servers_release(pins):
    rel = pins.with_series()[-1]
    slugs = [v.slug for _, v in pins.patchset.named(rel)]
    f = P.check_series(rel, None, "PY", pins)
    assert f.severity == "warning"
    assert f.message == (
        f"vLLM {rel} has vpatch's {rel} series ({len(slugs)} patches: {', '.join(slugs)}), and "
        "the server cannot tell whether it is installed: run `vpatch check --python PY` with "
        "the server's python (or give it here, --python PY)"
    )
    assert P.check_series(f"{rel}+cu129", UNKNOWN, "PY", pins).severity == "warning"
    ready = Readiness(True, {})
    assert P.check_series(rel, ready, "/opt/py", pins).severity == "info"
    said = "EAGLE-3 ... NOT ready: run `vpatch install --python /opt/py`"
    f = P.check_series(rel, Readiness(False, {}, said=said), "/opt/py", pins)
    assert f.severity == "warning" and f.message.endswith(said)


def test_a_post_release_has_its_releases_series(pins):
    """A server saying X.Y.Z.postN the lock does not pin serves X.Y.Z's code
    plus fixes: its series is X.Y.Z's (Lock.standing, as check, install and
    doctor answer; docs/install.md, "Which releases")."""
    rel = pins.with_series()[-1]
    post = f"{rel}.post1"
    assert post not in pins.releases
    f = P.check_series(post, None, "PY", pins)
    assert f.severity == "warning"
    assert f.message.startswith(f"vLLM {post} has vpatch's {rel} series (")
    ready = P.check_series(f"{post}+cu129", Readiness(True, {}), "/opt/py", pins)
    assert ready.severity == "info" and f"vpatch's {rel} series" in ready.message


def test_a_release_vpatch_does_not_pin(pins):
    f = P.check_series(next_release(pins), None, "PY", pins)
    assert f.severity == "warning" and "newer than vpatch knows" in f.message
    f = P.check_series("0.1.0", None, "PY", pins)  # older than any pinned
    assert f.severity == "info" and "not a release vpatch pins" in f.message
    assert P.check_series("not-a-version", None, "PY", pins).severity == "warning"


def test_the_server_against_the_deployment():
    s = from_options("org/target", "org/drafter", 1, 1, 3)
    ok = watch(V.WORKING, cards=[Card(M, "org/target", 256)])
    assert P.check_deployment(ok, s).severity == "info"
    other = watch(Counters(1, 5, 1, (1, 0, 0, 0, 0)), cards=[Card(M, "/models/other", 256)])
    f = P.check_deployment(other, s)
    assert f.severity == "warning"
    assert f.message == (
        "http://h:1 serves /models/other, not org/target and drafts 5 tokens a step, not 3: is "
        "it the deployment given? (the preflight checks the one given)"
    )


def test_the_report(pins):
    w = watch(
        counters(500, (300, 210, 140)), counters(700, (400, 300, 200)), cards=[Card(M, "/m/t", 256)]
    )
    found = [P.check_series(REL, None, "PY", pins), *P.judge(w)]
    r = P.Postflight([w], found)
    assert r.ok
    text = r.to_text().splitlines()
    assert text[:4] == [
        f"server   http://h:1: vLLM {REL}",
        f"  model  {M} (root /m/t, max_model_len 256, 1 engine, k = 3)",
        "    since start     700 drafts, 2100 draft tokens, 900 accepted: acceptance rate 0.429, "
        "mean acceptance length 2.29, per position 0.571 0.429 0.286",
        "    last 10s        200 drafts, 600 draft tokens, 250 accepted: acceptance rate 0.417, "
        "mean acceptance length 2.25, per position 0.500 0.450 0.300",
    ]
    assert text[-1] == "ok: 0 errors, 1 warning"
    data = json.loads(json.dumps(r.to_json()))
    assert data["ok"] is True and data["preflight"] is None
    (srv,) = data["servers"]
    assert (srv["url"], srv["version"], srv["interval"]) == ("http://h:1", REL, 10)
    (fig,) = srv["figures"]
    assert fig["since_start"]["drafts"] == 700 and fig["window"]["drafts"] == 200
    assert fig["window"]["acceptance_per_position"] == pytest.approx([0.5, 0.45, 0.3])
    bad = P.Postflight([w], [Finding("drafts", "error", "x")], preflight())
    assert not bad.ok and bad.to_text().splitlines()[-1] == "vllm serve t"
    assert bad.to_json()["preflight"]["serve"] == "vllm serve t"


def test_the_docs_state_the_thresholds():
    """docs/doctor.md's --server section states the figures the code holds
    (stated once in judge.py; the docs follow it)."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "doctor.md").read_text()
    section = doc.split("## After it serves: `--server`")[1].split("\n## ")[0]
    for figure in (
        f"under **{P.LOW_P0:.3f}**",
        f"half of **{P.WORKING_P0:.3f}**",
        f"**{P.PUBLIC_LENGTH} at k = {P.PUBLIC_K}**",
        f"under **{P.DECAY:g} x** position 0's",
        f"at least **{P.SAMPLE}** tokens",
        f"**{P.SAMPLE}** drafts before a figure is judged",
    ):
        assert figure in section, figure
