"""`vpatch check`: each patch in an environment's vLLM; EAGLE-3 ready or not."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from .options import Parser, Subparsers, command, output, python, say, show


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "check",
        execute,
        "each patch in an environment's vLLM; EAGLE-3 ready or not",
        "vpatch check --python /opt/vllm/bin/python --format json",
        (6, 12),
        {0: "ready", 1: "not ready (the report says why)"},
    )
    python(p)
    output(p, "text", "json")


def execute(args: Namespace, parser: Parser) -> int:
    """Exit 0 when EAGLE-3 is ready, 1 when not (the report says why)."""
    from ..env import check

    report = check.inspect(args.python, pins=lock.load(), say=say)
    show(report, args.format)
    return 0 if report.eagle3_ready else 1
