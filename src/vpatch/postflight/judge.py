"""Judging a running server's speculative decoding (`vpatch doctor
--server`): the figures of its counters (server.py), since the server
started and over a window, and what they say, each finding with its reason.

The figures (of metrics.py's counters), as vLLM's own SpecDecodingProm
docstring defines them
(v1/spec_decode/metrics.py, 0.17.1-0.34.0): the acceptance rate is accepted
/ draft tokens; the mean acceptance length 1 + accepted / drafts (the bonus
token counted); the acceptance at position i is per_position[i] / drafts,
the drafts whose first i + 1 tokens were all accepted (the scheduler counts
a draft's accepted tokens from the first: SpecDecodingStats.observe_draft),
so it never rises with i. Doctor adds the conditional acceptance at
position i >= 1, per_position[i] / per_position[i - 1]: of the drafts
accepted up to i - 1, the share accepted at i too.

What it flags, with the thresholds below, each stated once here and in
docs/doctor.md:

  * no drafts at all: not one draft while the server decoded at least SAMPLE
    tokens (a lower bound: the tokens generated beyond each request's first,
    which prefill makes without a draft, = generated - finished - running);
  * position 0 far below a working pair: its acceptance under LOW_P0 over at
    least SAMPLE drafts, with the deployment's facts that explain it when
    doctor knows the deployment (its preflight's findings);
  * a decay that points at the drafter: position 0 at or above LOW_P0, and a
    later position's conditional acceptance under DECAY x position 0's. The
    target's states reach the drafter at its first step only; each later
    step runs on the drafter's own hidden state (vLLM's EAGLE proposer), so
    a collapse after a sound position 0 is the drafter's (its norms, rope,
    the steps it was trained for), not the target's;
  * a release with vpatch's series where doctor cannot tell that it is
    installed (the server says its release, not its patches): run `vpatch
    check --python PY` on the server's environment;
  * counters vLLM cannot give (`inconsistent`: more accepted than drafted,
    a position accepted more often than the one before it): said, and
    nothing judged on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from .. import lock, settings
from ..doctor import behaviour
from ..doctor.environment import Readiness
from ..doctor.report import Finding, Report, report_lines
from ..doctor.serve import Serve
from ..shown import Shown
from .metrics import Counters
from .server import Watch

# -- the thresholds, each once --------------------------------------------------------

# The lowest public figure for a working EAGLE-3 pair on these targets (the
# issue cites both): lightseekorg's Kimi-K2.6 EAGLE-3 MLA drafter, mean
# acceptance length 2.6-3.25 at k = 3 on 8xB200 (its model card); SGLang's
# EAGLE 3.1 drafter, 3.2 on GSM8K. The tier's trained tiny pair gives 2.30 at
# k = 3 (acceptance 0.433; docs/measurements.md, `make bench-spec`).
PUBLIC_LENGTH = 2.6
PUBLIC_K = 3
# Acceptance never rises with the position, so position 0's is at least the
# mean over the k positions: (length - 1) / k = 0.533 for the lowest public
# figure (0.433 for the tier's pair).
WORKING_P0 = (PUBLIC_LENGTH - 1) / PUBLIC_K
FAR = 0.5  # "far below": under half of it
LOW_P0 = FAR * WORKING_P0  # 0.267
DECAY = 0.5  # a later position's conditional acceptance under half of position 0's
# Drafts (and, for "no drafts", decoded tokens) a figure needs before it is
# judged: over 100 drafts a working pair's position-0 acceptance of 0.533 has
# a standard error of 0.05, a fifth of its distance to LOW_P0.
SAMPLE = 100

# The preflight's checks whose findings explain a low position 0 (what feeds
# the drafter's first step: the target's states, their layers and order, fc
# and its norm, the runner), and a decay (what the drafter's later steps run
# on: its own norms, rope, class and format, the runner).
TARGET_SIDE = ("aux_layers", "trained_layers", "hidden_size", "fc", "norms", "model_runner")
DRAFTER_SIDE = (
    "norms",
    "rope",
    "rope_range",
    "mla_detection",
    "architecture",
    "drafter_format",
    "model_runner",
)


# -- the figures ------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """The figures of a model's counters (since start, or a window)."""

    counters: Counters

    @property
    def rate(self) -> float | None:
        c = self.counters
        return c.accepted / c.draft_tokens if c.draft_tokens else None

    @property
    def length(self) -> float | None:
        c = self.counters
        return 1 + c.accepted / c.drafts if c.drafts else None

    @property
    def per_position(self) -> tuple[float, ...]:
        c = self.counters
        return tuple(a / c.drafts for a in c.per_position) if c.drafts else ()

    @property
    def conditional(self) -> tuple[float | None, ...]:
        """Position i >= 1: per_position[i] / per_position[i - 1] (None: no
        draft accepted up to i - 1)."""
        p = self.counters.per_position
        return tuple(p[i] / p[i - 1] if p[i - 1] else None for i in range(1, len(p)))

    @property
    def decoded(self) -> int | None:
        """At least this many tokens came from decode steps (each request's
        first token comes from its prefill): generated - finished - running;
        None where the page lacks one of them."""
        c = self.counters
        if c.generated is None or c.finished is None or c.running is None:
            return None
        return max(c.generated - c.finished - c.running, 0)

    def to_json(self) -> dict[str, Any]:
        c = self.counters
        return {
            "drafts": c.drafts,
            "draft_tokens": c.draft_tokens,
            "accepted": c.accepted,
            "accepted_per_position": list(c.per_position),
            "generated": c.generated,
            "acceptance_rate": self.rate,
            "mean_acceptance_length": self.length,
            "acceptance_per_position": list(self.per_position),
            "conditional_acceptance": list(self.conditional),
        }

    def line(self) -> str:
        c = self.counters
        if not c.drafts:
            return f"no drafts ({c.generated if c.generated is not None else '?'} tokens generated)"
        per = " ".join(f"{x:.3f}" for x in self.per_position)
        return (
            f"{c.drafts} drafts, {c.draft_tokens} draft tokens, {c.accepted} accepted: acceptance "
            f"rate {self.rate or 0:.3f}, mean acceptance length {self.length or 1:.2f}, per "
            f"position {per}"
        )


def figures(w: Watch) -> dict[str, tuple[Figures, Figures | None]]:
    """model name -> (its figures since the server started, over the window;
    None without one, or when the server restarted in it)."""
    out: dict[str, tuple[Figures, Figures | None]] = {}
    before = w.first.models() if w.second else {}
    for model, c in w.last.models().items():
        window = c.since(before[model]) if model in before else None
        out[model] = (Figures(c), Figures(window) if window else None)
    return out


# -- judging ------------------------------------------------------------------------------


def judge(w: Watch, preflight: Report | None = None, fleet: bool = False) -> list[Finding]:
    """The findings of one server: per model, on the window when it has at
    least SAMPLE drafts (or none while it decoded SAMPLE tokens), else
    since the start. `preflight`: the report of
    the deployment the server was tied to (its findings explain a low
    acceptance); `fleet`: several servers, so each message names its own."""
    out = []
    who = f"{w.first.url}: " if fleet else ""
    for model, (start, window) in figures(w).items():
        name = f"{who}{model}: " if _models(w) > 1 else who
        if w.second is not None and window is None:
            out.append(
                Finding(
                    "window",
                    "warning",
                    f"{name}the counters went back between the two reads (the server "
                    "restarted?): no window; the figures are since the start",
                )
            )
        judged, span = start, "since the server started"
        if window is not None and (
            window.counters.drafts >= SAMPLE
            or (not window.counters.drafts and (window.decoded or 0) >= SAMPLE)
        ):  # enough drafts in the window, or none while it decoded (drafting stopped)
            judged, span = window, f"over the last {w.interval:g}s"
        elif window is not None and start.counters.drafts >= SAMPLE:
            span += f" (the {w.interval:g}s window has {window.counters.drafts}, too few)"
        out += _judge(name, judged, span, preflight)
    return out


def _models(w: Watch) -> int:
    return len({m for m, _ in w.last.engines})


def inconsistent(c: Counters) -> str:
    """Why these counters cannot be vLLM's, or "". vLLM counts them together
    (SpecDecodingStats.observe_draft: a draft's tokens, then those accepted
    of them, each position from the first), so at any read a draft has one
    token at least, no more tokens are accepted than drafted, and no
    position is accepted in more drafts than the one before it (position 0:
    than there are drafts)."""
    if c.accepted > c.draft_tokens:
        return f"{c.accepted} accepted of {c.draft_tokens} draft tokens"
    if c.drafts > c.draft_tokens:
        return f"{c.drafts} drafts of {c.draft_tokens} draft tokens (a draft has one at least)"
    p = c.per_position
    if p and p[0] > c.drafts:
        return f"position 0 accepted in {p[0]} drafts of {c.drafts}"
    for i in range(1, len(p)):
        if p[i] > p[i - 1]:
            return (
                f"position {i} accepted in {p[i]} drafts, position {i - 1} in {p[i - 1]} (a "
                "draft's accepted tokens count from the first)"
            )
    return ""


def _judge(name: str, f: Figures, span: str, preflight: Report | None) -> list[Finding]:
    c = f.counters
    if why := inconsistent(c):
        return [
            Finding(
                "counters",
                "warning",
                f"{name}the counters {span} are inconsistent: {why}; vLLM counts them together "
                "(SpecDecodingStats.observe_draft), so they are not vLLM's counts as it made "
                "them (a proxy or exporter in between?): doctor judges nothing on them",
            )
        ]
    if not c.drafts:
        decoded = f.decoded
        if decoded is None:
            return [
                Finding(
                    "drafts",
                    "warning",
                    f"{name}no drafts {span}, and the page lacks vllm:generation_tokens, "
                    "vllm:request_success or vllm:num_requests_running to tell whether a "
                    "request was decoded",
                )
            ]
        if decoded >= SAMPLE:
            return [
                Finding(
                    "drafts",
                    "error",
                    f"{name}no drafts at all {span}, while at least {decoded} tokens were "
                    "decoded (generated beyond each request's first): speculative decoding is "
                    "configured (its counters are there) and proposes nothing; the server's "
                    f"log says why{_facts(preflight, DRAFTER_SIDE)}",
                )
            ]
        return [
            Finding(
                "drafts",
                "info",
                f"{name}no drafts {span}, and {decoded} tokens decoded, under the {SAMPLE} "
                "doctor judges: send requests, or watch a window under load (--interval N)",
            )
        ]
    if c.drafts < SAMPLE:
        return [
            Finding(
                "drafts",
                "info",
                f"{name}{c.drafts} drafts {span}: fewer than the {SAMPLE} doctor judges a "
                "figure on; send requests, or watch a window under load (--interval N)",
            )
        ]
    p0 = f.per_position[0]
    low = (
        f"doctor flags under {LOW_P0:.3f}, half of {WORKING_P0:.3f}: the least position 0 "
        f"accepts at the lowest public mean acceptance length for these targets, "
        f"{PUBLIC_LENGTH} at k = {PUBLIC_K} (docs/doctor.md)"
    )
    if p0 < LOW_P0:
        return [
            Finding(
                "position0",
                "warning",
                f"{name}position 0 accepts {p0:.3f} of {c.drafts} drafts {span}, far below a "
                f"working pair ({low}); the drafter gets the target's states wrong (aux layer "
                "ids one off or in another order, a norm ignored), serves another target than "
                "it was trained on, or runs on a runner that drafts worse "
                "(vllm-project/vllm#40551; not seen on the tier's pair); sampled requests "
                f"(temperature > 0) accept less too{_facts(preflight, TARGET_SIDE)}",
            )
        ]
    found = [
        Finding(
            "position0",
            "info",
            f"{name}position 0 accepts {p0:.3f} of {c.drafts} drafts {span}; {low}",
        )
    ]
    cond = f.conditional
    for i, ci in enumerate(cond, start=1):
        if ci is not None and c.per_position[i - 1] >= SAMPLE and ci < DECAY * p0:
            found.append(
                Finding(
                    "decay",
                    "warning",
                    f"{name}position {i} accepts {ci:.3f} of the {c.per_position[i - 1]} "
                    f"drafts accepted up to position {i - 1}, under {DECAY:g} x position 0's "
                    f"{p0:.3f}, while position 0 holds: each draft step after the first runs "
                    "on the drafter's own hidden state, not the target's, so this points at "
                    "the drafter (its norms, rope, the steps it was trained for, how the "
                    f"runner feeds its steps), not the target{_facts(preflight, DRAFTER_SIDE)}",
                )
            )
            break
    else:
        shown = " ".join("-" if x is None else f"{x:.3f}" for x in cond) or "none (k = 1)"
        found.append(
            Finding(
                "decay",
                "info",
                f"{name}conditional acceptance after position 0: {shown}; none under "
                f"{DECAY:g} x position 0's",
            )
        )
    return found


def _facts(preflight: Report | None, checks: Sequence[str]) -> str:
    """What the deployment's preflight knows that explains it: its findings
    of `checks` that are not info, and the runner; or how to tie one."""
    if preflight is None:
        return (
            "; tie the server to its deployment (`-- vllm serve ...`, or --target/--drafter) "
            "for the config facts that explain it"
        )
    bad = [
        f"{f.check} ({f.severity})"
        for f in preflight.findings
        if f.check in checks and f.severity != "info"
    ]
    runner = next((f.message for f in preflight.findings if f.check == "model_runner"), "")
    said = (
        f"; the deployment's preflight (above) finds: {', '.join(bad)}"
        if bad
        else ("; the deployment's preflight (above) finds nothing that explains it")
    )
    return said + (f"; {runner}" if runner else "")


def release_named(version: str) -> Version | None:
    """The release a server's /version names: X.Y.Z, as vLLM's versions are
    (setuptools_scm's, of its vX.Y.Z tags: a build from source adds .devN
    and +local), else None: 'dev' (a vLLM built without its version file,
    vllm/version.py), '0.26', anything else."""
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return v if len(v.release) == 3 else None


def check_series(
    version: str, readiness: Readiness | None, python: str, pins: lock.Lock
) -> Finding:
    """Whether the server's release has vpatch's series, and whether it is
    installed: `readiness` is `vpatch check`'s on the server's environment
    (--python), None when doctor cannot tell (the server says its release
    only)."""
    release = release_named(version)
    if release is None:
        return Finding(
            "series",
            "warning",
            f"the server's /version is {settings.shown(version)}, which names no vLLM release "
            "(vLLM's are X.Y.Z; one built without its version file answers 'dev': "
            "vllm/version.py): whether it has vpatch's series is not known; run `vpatch check "
            "--python PY` with the server's python: it reads the release installed there",
        )
    # Lock.standing, the one answer: a post release the lock does not pin is
    # its release's code plus fixes, and has its release's series
    public = pins.standing(version).release
    if public is None:
        if behaviour.newer(pins, release.public) is not None:
            return Finding(
                "series",
                "warning",
                f"vLLM {version} is newer than vpatch knows (its rules end at "
                f"{pins.rules.newest}): whether it needs a fix vpatch carries is not known; "
                "upgrade vpatch, or carry the release (docs/maintaining.md)",
            )
        return Finding(
            "series",
            "info",
            f"vLLM {version} is not a release vpatch pins ({pins.versions()[0]}-"
            f"{pins.versions()[-1]}): no series to check",
        )
    named = pins.patchset.named(public)
    if not named:
        return Finding("series", "info", f"vLLM {version}: vpatch has no series for it")
    slugs = ", ".join(v.slug for _, v in named)
    what = f"vpatch's {public} series ({len(named)} patches: {slugs})"
    if readiness is None or not readiness.known:
        return Finding(
            "series",
            "warning",
            f"vLLM {version} has {what}, and the server cannot tell whether it is installed: "
            f"run `vpatch check --python {python}` with the server's python (or give it here, "
            "--python PY)",
        )
    if readiness.ready:
        return Finding(
            "series", "info", f"vLLM {version}: {what} installed (`vpatch check`: ready)"
        )
    said = readiness.said or "`vpatch check` says EAGLE-3 is NOT ready there"
    return Finding("series", "warning", f"vLLM {version}: {what}; {said}")


def check_deployment(w: Watch, serve: Serve) -> Finding:
    """The server against the deployment it was tied to: the model it
    serves (its root, the serve command's MODEL) and its draft positions."""
    r = w.last
    roots = sorted({c.root for c in r.cards if c.root})
    ks = sorted({len(c.per_position) for c in r.engines.values()})
    k = serve.num_speculative_tokens
    said = []
    if roots and serve.model not in roots:
        said.append(f"serves {', '.join(roots)}, not {serve.model}")
    if ks and ks != [k]:
        said.append(f"drafts {'/'.join(map(str, ks))} tokens a step, not {k}")
    if said:
        return Finding(
            "deployment",
            "warning",
            f"{r.url} {' and '.join(said)}: is it the deployment given? (the preflight checks "
            "the one given)",
        )
    unread = f" ({r.models_unread}: its model not compared)" if r.models_unread else ""
    return Finding(
        "deployment",
        "info",
        f"{r.url} serves the deployment given, {k} draft tokens a step{unread}",
    )


# -- the report ----------------------------------------------------------------------------


@dataclass
class Postflight(Shown):
    """What `vpatch doctor --server` prints: each server's figures, the
    findings (the deployment's preflight first, when tied to one), the
    verdict."""

    watches: list[Watch]
    findings: list[Finding]
    preflight: Report | None = None
    header: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        pre = self.preflight.to_json() if self.preflight else None
        return {
            "ok": self.ok,
            "findings": [
                {"check": f.check, "severity": f.severity, "message": f.message}
                for f in self.findings
            ],
            "servers": [_server_json(w) for w in self.watches],
            "preflight": {k: v for k, v in pre.items() if k not in ("ok", "findings")}
            if pre
            else None,
        }

    def lines(self) -> list[str]:
        head = list(self.preflight.header) if self.preflight else []
        for w in self.watches:
            head += _server_lines(w)
        return report_lines(head, self.findings, [self.preflight.serve] if self.preflight else [])


def _server_lines(w: Watch) -> list[str]:
    r = w.last
    out = [f"server   {r.url}: vLLM {r.version}"]
    for model, (start, window) in figures(w).items():
        card = r.card(model)
        about = []
        if card and card.root and card.root != model:
            about.append(f"root {card.root}")
        if card and card.max_model_len is not None:
            about.append(f"max_model_len {card.max_model_len}")
        n = r.engine_count(model)
        about.append(f"{n} engine{'s' * (n != 1)}")
        about.append(f"k = {len(start.counters.per_position)}")
        out.append(f"  model  {model} ({', '.join(about)})")
        out.append(f"    since start     {start.line()}")
        if w.second is not None:
            out.append(
                f"    last {w.interval:g}s".ljust(20)
                + (window.line() if window else "none: the counters went back")
            )
    if r.models_unread:
        out.append(f"  /v1/models not read: {r.models_unread}")
    return out


def _server_json(w: Watch) -> dict[str, Any]:
    r = w.last
    models = []
    for model, (start, window) in figures(w).items():
        models.append(
            {
                "model": model,
                "engines": r.engine_count(model),
                "since_start": start.to_json(),
                "window": window.to_json() if window else None,
            }
        )
    return {
        "url": r.url,
        "version": r.version,
        "models": [{"id": c.id, "root": c.root, "max_model_len": c.max_model_len} for c in r.cards],
        "models_unread": r.models_unread or None,
        "interval": w.interval,
        "figures": models,
    }
