"""`vpatch doctor`: check an EAGLE-3 drafter, its target and the serve
command against the serving environment's vLLM before a 1T model spends half
an hour loading. One request: resolve the target and the drafter (folders,
or hub ids from the local cache), read the serve command (or make one from
--target/--drafter), find the environment's vLLM and ask `vpatch check`
about it, and diagnose (doctor/checks.py). The CLI prints the report as
text or JSON and exits 0 (no error), 1 (an error) or 2 (bad input)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..doctor import configs, hub, serve
from ..doctor.checks import diagnose
from ..doctor.environment import Ready, by_check, find_vllm
from ..doctor.report import Report
from ..errors import ConfigError


@dataclass(frozen=True)
class Request:
    """What the user asked: a serve command (its words), or a target and a
    drafter with the few flags doctor's own options give."""

    command: tuple[str, ...] = ()
    target: str | None = None
    drafter: str | None = None
    python: str = "python3"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    num_speculative_tokens: int = 3


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
        if v < 1:
            raise ConfigError(f"{name} must be at least 1, got {v}")
    return serve.from_options(
        req.target,
        req.drafter,
        req.tensor_parallel_size,
        req.pipeline_parallel_size,
        req.num_speculative_tokens,
    )


def doctor(
    req: Request,
    ready: Ready = by_check,
    cache_dir: str | Path | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Report:
    """The report for a request. Bad input (no such model, a command that is
    not a serve command, unparseable JSON) raises ConfigError."""
    s = read_serve(req)
    t = hub.resolve(s.model, cache_dir)
    d = hub.resolve(s.drafter, cache_dir)
    if not s.given and configs.read_target(t.path).remote_code:
        s = serve.from_options(
            s.model,
            s.drafter,
            s.tensor_parallel_size,
            s.pipeline_parallel_size,
            req.num_speculative_tokens,
            remote=True,
        )
    env = find_vllm(req.python, say)
    return diagnose(t, d, env, ready(env), s)
