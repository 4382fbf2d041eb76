"""doctor's checks on real-shaped pairs (tests/support/pairs.py), for the
tests of vpatch.doctor.checks and its families: diagnose a pair on a
release, read the report, name a fix as `vpatch check` reports it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from vpatch import lock
from vpatch.doctor import checks as doctor
from vpatch.doctor import defects, hub, serve
from vpatch.doctor.environment import Readiness, VllmEnv

from support import pairs as F

IDS_KEY = "eagle_aux_hidden_state_layer_ids"
PINS = lock.load()
NO_ENV: dict = {}


def span(key: str) -> tuple[str, str, str | None]:
    """Where vpatch's series carries the fix of defect `key` (its first and
    last release, patches.toml) and the first release that has it itself
    (its DEP-3 Applied-Upstream; None: none yet)."""
    slug = defects.fix(PINS, key)
    assert slug is not None, key
    variants = PINS.patchset.variants[slug]
    return variants[0].first, variants[-1].last, PINS.patchset.upstream(slug).release


def check(
    tmp: Path,
    version: str | None = PINS.default().version,  # the newest patched release
    ready: bool | None = True,
    tp: int = 8,
    pp: int = 1,
    command=None,
    max_len: str | None = None,
    patches: dict | None = None,
    environ: dict | None = None,
    **kw,
) -> doctor.Report:
    t, d = F.pair(tmp, **kw)
    env = VllmEnv("python3", "vllm" if version else None, version, "/x" if version else None)
    s = serve.from_options(str(t), str(d), tp, pp, remote=True)
    if command is not None or max_len is not None:
        spec = {"method": "eagle3", "model": str(d), "num_speculative_tokens": 3}
        words = ["vllm", "serve", str(t), "--trust-remote-code", "-tp", str(tp)]
        words += ["--max-model-len", max_len] if max_len else []
        words += [*(command or []), "--speculative-config", json.dumps(spec)]
        s = serve.parse(words)
    readiness = Readiness(ready, dict(patches or {}), known=ready is not None)
    return doctor.diagnose(
        hub.resolve(str(t)), hub.resolve(str(d)), env, readiness, s, environ, pins=PINS
    )


def diag(t: Path, d: Path, env: VllmEnv) -> doctor.Report:
    s = serve.from_options(str(t), str(d), 8)
    return doctor.diagnose(
        hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, {}, pins=PINS
    )


def sev(report: doctor.Report, name: str) -> str:
    return find(report, name).severity


def find(report: doctor.Report, name: str) -> doctor.Finding:
    return next(f for f in report.findings if f.check == name)


def errors(report: doctor.Report) -> set[str]:
    return {f.check for f in report.findings if f.severity == "error"}


FORCED = ["--attention-backend", "FLASHMLA"]


def named(version: str, key: str) -> str:
    """The name `vpatch check` reports the fix of defect `key` under in
    `version`'s series (NNNN-slug: its place there, from the patch set)."""
    slug = defects.fix(PINS, key)
    return next(n.removesuffix(".patch") for n, v in PINS.patchset.named(version) if v.slug == slug)


def reported(version: str, key: str, state: str) -> dict:
    return {named(version, key): state}


def published(
    tmp: Path,
    command: str,
    version: str | None = PINS.default().version,
    fmt: str = "lightseekorg_mla",
    target: str = "kimi_k26",
    drafter: str = F.KIMI_K26_DRAFTER,
    ready: bool | None = True,
    patches: dict | None = None,
    environ: dict | None = None,
    **kw,
) -> doctor.Report:
    """doctor's report on a published serve command (support.pairs'
    KIMI_K26_COMMAND, a recipe's): the target it names and `drafter` (a hub
    id in the command) stand for the fixture pair (`target`, `fmt`), the
    rest of the command as published."""
    t, d = F.pair(tmp, target=target, fmt=fmt, **kw)
    words = shlex.split(command.replace(drafter, str(d)))
    model = next(w for w in words[2:] if not w.startswith("-") and w != "--model")
    words = [str(t) if w == model else w for w in words]
    env = VllmEnv("python3", "vllm" if version else None, version, "/x" if version else None)
    readiness = Readiness(ready, dict(patches or {}), known=ready is not None)
    s = serve.parse(words)
    return doctor.diagnose(
        hub.resolve(str(t)), hub.resolve(str(d)), env, readiness, s, environ or {}, pins=PINS
    )
