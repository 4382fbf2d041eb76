"""`vpatch install`: patch the vLLM installed in a Python environment."""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from .. import lock
from .options import Parser, Subparsers, command, dry_run, path, python, say, series


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "install",
        execute,
        "patch the vLLM installed in a Python environment",
        "vpatch install --python /opt/vllm/bin/python --dry-run",
        (5, 6, 9, 11, 12),
    )
    python(p)
    series(p, "install the series in this folder instead")
    dry_run(p)


def execute(args: Namespace, parser: Parser) -> int:
    from ..env import install

    res = install.install(
        args.python, path(args.series), dry_run=args.dry_run, say=say, pins=lock.load()
    )
    report(res, "replace", "")
    return 0


def report(res: Any, verb: str, done: str) -> None:
    """install's and uninstall's report: what changed (or, dry, would)."""
    where = f"{res.dist.name} {res.dist.version} at {res.dist.root}"
    if res.action == "nothing":
        print(f"{where}: {res.message}; nothing to do")
    elif res.action == "dry-run":
        print(f"{where}: {res.message} (dry run: nothing changed)")
        for f in res.files:
            print(f"  {verb}  {f}")
        for f, what in res.bytecode.items():
            print(f"  {what:24} {f}")
    else:
        print(f"{where}: {done or res.action + ' '}{res.message}")
    if res.verdict:  # after an install: the line `vpatch check` ends with now
        print(res.verdict)
