"""`vpatch install`: patch the vLLM installed in a Python environment."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from .options import Parser, Subparsers, command, dry_run, path, python, say, series, show


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
    show(res)
    return 0
