"""`vpatch unapply`: a patched tree back to its baseline."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from .. import lock
from .options import Parser, Subparsers, command, path, series, show


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "unapply",
        execute,
        "return a patched tree to its baseline (refuses commits not the series')",
        "vpatch unapply build/vllm-0.17.1",
        (5, 6, 9, 10, 11),
    )
    p.add_argument("dest", metavar="DIR", help="the tree")
    series(p, "the tree has the series in this folder")
    p.add_argument(
        "--discard-commits",
        action="store_true",
        help="drop commits that are not the series' own too (yours: export them first)",
    )


def execute(args: Namespace, parser: Parser) -> int:
    from ..commands import apply

    show(apply.unapply(Path(args.dest), path(args.series), args.discard_commits, pins=lock.load()))
    return 0
