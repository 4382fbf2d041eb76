"""`vpatch doctor`: check an EAGLE-3 drafter, its target and the serve
command against the serving environment's vLLM before a 1T model spends half
an hour loading. One request: read the serve command (or make one from
--target/--drafter), resolve the target and the drafter (folders, or hub ids
read from the hub, or from the local cache when offline: doctor/hub.py),
find the environment's vLLM and ask `vpatch check` about it (or, given
`--vllm RELEASE [--patched]`, take what check would say of that release
installed: environment.from_release), and diagnose (doctor/checks/). The
CLI prints the report as text or JSON and exits 0 (no error), 1 (an error)
or 2 (bad input)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .. import lock, settings
from ..doctor import deadline, hub, serve
from ..doctor.checks import diagnose
from ..doctor.environment import Readiness, Ready, VllmEnv, by_check, find_vllm, from_release
from ..doctor.report import Report
from ..errors import ConfigError


@dataclass(frozen=True)
class Request:
    """What the user asked: a serve command (its words), or a target and a
    drafter with the few flags doctor's own options give."""

    command: tuple[str, ...] = ()
    target: str | None = None
    drafter: str | None = None
    python: str | None = None  # the serving environment's python (default: python3)
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    num_speculative_tokens: int = 3
    offline: bool = False  # hub ids from the local cache only (else HF_HUB_OFFLINE decides)
    vllm: str | None = None  # a pinned release instead of an environment (--vllm)
    patched: bool = False  # with that release's series installed (--patched)


def read_serve(req: Request) -> serve.Serve:
    if req.command:
        if req.target or req.drafter:
            raise ConfigError(
                "give either --target/--drafter or a serve command after `--`, not both"
            )
        return serve.parse(list(req.command))
    if not req.target or not req.drafter:
        raise ConfigError(
            "nothing to check: give `-- vllm serve MODEL --speculative-config '{...}'` or "
            "--target T --drafter D"
        )
    for name, v in (
        ("--tensor-parallel-size", req.tensor_parallel_size),
        ("--pipeline-parallel-size", req.pipeline_parallel_size),
        ("--num-speculative-tokens", req.num_speculative_tokens),
    ):
        settings.whole(v, name)  # the CLI's bound, for a Request made in code too
    target, revision = hub.split(req.target)
    drafter, drafter_revision = hub.split(req.drafter)
    return serve.from_options(
        target,
        drafter,
        req.tensor_parallel_size,
        req.pipeline_parallel_size,
        req.num_speculative_tokens,
        revision=revision,
        drafter_revision=drafter_revision,
    )


def doctor(
    req: Request,
    ready: Ready | None = None,
    where: hub.Hub | None = None,
    say: Callable[[str], None] = lambda _: None,
    *,
    pins: lock.Lock,
) -> Report:
    """The report for a request, with vpatch's releases and patch set `pins`.
    Bad input (no such model, a hub that refuses or cannot be reached, a
    command that is not a serve command, unparseable JSON) raises
    ConfigError. `ready`: what `vpatch check` says of the environment
    (default: by_check; not asked with `req.vllm`); `where`: how hub ids
    are read (default: huggingface_hub's settings; `req.offline` forces the
    cache); `say`: progress while PY or the hub is awaited."""
    s = read_serve(req)
    # names and revisions, before any request (a revision is a path in the cache)
    hub.check(s.model, s.revision)
    hub.check(s.drafter, s.drafter_revision)
    stated = None
    if req.vllm is not None:
        if req.python is not None:
            raise ConfigError("give --python PY or --vllm RELEASE, not both")
        stated = from_release(req.vllm, req.patched, pins)
    elif req.patched:
        raise ConfigError("--patched goes with --vllm RELEASE (an environment says for itself)")
    where = where or hub.Hub()
    if req.offline:
        where = replace(where, offline=True)

    def environment() -> tuple[VllmEnv, Readiness]:
        if stated is not None:
            return stated
        env = find_vllm(req.python or "python3", say)
        return env, ready(env) if ready else by_check(env, pins)

    # At once: asking PY (child processes) and reading the two models (on hub
    # ids, importing huggingface_hub and a dozen requests), under one deadline
    # for the hub and Ctrl-C (doctor/deadline.py). The target's error comes
    # first, then the drafter's, then the environment's.
    with deadline.Reads(where.deadline, say) as reads:
        probe = reads.start("PY", environment, bounded=False)
        target = reads.start(s.model, hub.resolve, s.model, s.revision, False, where)
        drafter = reads.start(s.drafter, hub.resolve, s.drafter, s.drafter_revision, True, where)
        t, d = reads.result(target), reads.result(drafter)
        env, readiness = reads.result(probe)
    return diagnose(t, d, env, readiness, s, pins=pins)
