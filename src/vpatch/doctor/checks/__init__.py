"""doctor's checks: what the environment's vLLM release will do with an
EAGLE-3 pair (a target, a drafter, the serve command), one finding per check.

It reads config.json files, the drafter's safetensors headers (never tensor
data, never the target's weights), the serve command (serve.py) and the vLLM
installed for `--python` (environment.py), then says per check what that
release of vLLM will do with the pair (behaviour.py holds the per-release
facts) and prints the serve command with its fixes.

The report (report.py) says what each severity means. A defect vpatch's
series fixes is an error unless `vpatch check` reports its patch
(defects.fix(key)) installed. The pair and what follows from it: pair.py; the
aux ids' two conventions: conventions.py.

A check is a function of the Pair that returns one finding (its message:
what vLLM <release> does, then the fix), in the module of its family:
vllm (the environment's vLLM and the target, and `defect()`), models (the
code that serves the target: serving.toml's file, its TP capture and aux
variables), layers (the aux ids), shapes (widths, vocabularies, tensors,
heads), drafter (how vLLM builds it: format, class, norms, rope) and command
(the serve command's flags). CHECKS lists every check once, in the report's order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ... import lock
from ...rules import Rules
from .. import behaviour, configs, hub, weights
from ..environment import Readiness, VllmEnv
from ..pair import Pair
from ..report import Report
from ..serve import Serve
from .command import (
    check_attention_backend,
    check_draft_kv_cache,
    check_max_model_len,
    check_model_runner,
    check_serve_flags,
    check_speculative_config,
    check_speculative_keys,
)
from .drafter import (
    check_architecture,
    check_format,
    check_mla_detection,
    check_norms,
    check_rope,
    check_rope_range,
)
from .layers import check_aux_layers, check_pipeline_parallel, check_trained_layers
from .models import check_aux_stream, check_serving, check_tp_capture, platform_said, runs
from .shapes import (
    check_d2t,
    check_embeddings,
    check_fc,
    check_hidden_size,
    check_tensor_parallel,
    check_vocab,
    check_weights,
)
from .vllm import check_target, check_vllm

CHECKS = (
    check_vllm,
    check_target,
    check_serving,
    check_serve_flags,
    check_model_runner,
    check_speculative_config,
    check_speculative_keys,
    check_format,
    check_architecture,
    check_mla_detection,
    check_aux_layers,
    check_tp_capture,
    check_aux_stream,
    check_trained_layers,
    check_hidden_size,
    check_fc,
    check_vocab,
    check_d2t,
    check_embeddings,
    check_norms,
    check_rope,
    check_attention_backend,
    check_draft_kv_cache,
    check_max_model_len,
    check_rope_range,
    check_tensor_parallel,
    check_pipeline_parallel,
    check_weights,
)


# -- the pair, diagnosed ------------------------------------------------------------


def choose_rules(env: VllmEnv, pins: lock.Lock) -> tuple[Rules, str, bool]:
    """(the rules doctor checks with, why they are not the environment's own
    release (empty when they are), whether the environment's vLLM is older
    than every rule)."""
    known = behaviour.known_releases(pins)
    if env.version and (too_new := behaviour.newer(pins, env.version)):
        raise too_new
    place = behaviour.place(env.version, known) if env.version else None
    standing = pins.standing(env.version) if env.version else None
    default = pins.default().version
    if env.version is None:
        rel, assumed = default, f"checked against vLLM {default} (vpatch's default release)"
    elif place is None:
        rel = default
        assumed = (
            f"vLLM {env.version} is older than {pins.rules.first}, which nothing here covers; "
            f"checked against {default}"
        )
    elif not place.exact:
        # a release between two whose rules were read (one pinned past the
        # newest rules is refused above: behaviour.newer)
        rel = place.release
        assumed = f"vLLM {env.version} is not a pinned release; checked as {rel}"
    elif standing is not None and standing.post and standing.release == place.release:
        rel = place.release  # Lock.standing: a post release is its release's code plus fixes
        assumed = (
            f"vLLM {env.version} is a post release of {rel}: checked as {rel} (its code plus "
            "fixes vpatch has not read)"
        )
    else:
        rel, assumed = place.release, ""
    return pins.rules.at(rel), assumed, bool(env.version) and place is None


def _where(env: VllmEnv) -> str:
    """The vLLM judged, as the report's header names it."""
    if env.version:
        return env.where
    return f"unknown ({env.given})" if env.given else f"none ({env.python})"


def diagnose(
    target: hub.Model,
    drafter: hub.Model,
    env: VllmEnv,
    readiness: Readiness,
    serve: Serve,
    environ: dict[str, str] | None = None,
    *,
    pins: lock.Lock,
) -> Report:
    """The findings for a resolved pair on an environment, served with
    `serve`; `environ` is the environment vLLM starts with (default: doctor's
    own, then the command's assignments); `pins` vpatch's releases and patch
    set."""
    t = configs.read_target(target.path)
    d = configs.read_drafter(drafter.path)
    tensors = drafter.tensors if drafter.tensors is not None else weights.read(drafter.path)
    rules, assumed, too_old = choose_rules(env, pins)
    eff = behaviour.effective(d.raw, d.format, rules)
    pair = Pair(
        t,
        d,
        eff,
        tensors,
        rules,
        env,
        readiness,
        serve,
        serve.environ(environ),
        pins,
        assumed,
        too_old=too_old,
    )
    if not serve.given and pair.remote_code:
        # --target/--drafter: the command doctor prints is one that loads
        pair.serve = replace(serve, trust_remote_code=True)
    findings = [c(pair) for c in CHECKS if runs(pair, c.__name__)]
    fixes: dict[str, Any] = {}
    for f in findings:
        fixes.update(f.fix)
    head = [
        f"target   {target.ref}: {t.describe()}",
        f"drafter  {drafter.ref}: {'speculators' if d.speculators else 'vLLM'} format, "
        f"{eff.arch or 'no known class'}",
        f"vllm     {_where(env)} -> rules of {rules.release}",
    ]
    if pair.served is not None:
        head.append(f"platform {platform_said(env.dist, env.version, env.platform)}")
    head += [f"read     {m.source()}" for m in (target, drafter) if m.hub]
    read = [m.to_json() for m in (target, drafter)]
    vllm = {
        "version": env.version,  # None: no vLLM where doctor looked
        "dist": env.dist,
        "python": None if env.given else env.python,
        "given": env.given or None,  # `--vllm R [--patched]`, no environment read
        "rules": rules.release,
        "platform": pair.platform[0],
        "eagle3_ready": readiness.ready if readiness.known else None,  # `vpatch check`
    }
    return Report(
        findings, pair.serve.command(**fixes), head, list(serve.uninterpreted), read, vllm
    )
