"""`vpatch apply`: a patched vLLM tree (git, one commit per patch)."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from .options import Parser, Subparsers, command, offline, path, say, series, show, source, version


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "apply",
        execute,
        "make a patched vLLM tree (git, one commit per patch)",
        "vpatch apply 0.25.0 --dest build/vllm-0.25.0",
        (3, 4, 5, 6, 7, 9, 10, 11),
    )
    version(p)
    p.add_argument("--dest", metavar="DIR", help="tree folder (default: build/vllm-<release>)")
    series(p, "apply the series in this folder instead")
    source(p)
    offline(p)


def execute(args: Namespace, parser: Parser) -> int:
    from ..commands import apply

    applied = apply.apply(
        args.version,
        dest=path(args.dest),
        source=args.source,
        series_dir=path(args.series),
        offline=args.offline,
        remote=args.remote,
        say=say,
        pins=lock.load(),
    )
    show(applied)
    return 0
