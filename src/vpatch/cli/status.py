"""`vpatch status`: each patch of a tree, applied or not."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from .options import Parser, Subparsers, command, path, series, show


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "status",
        execute,
        "list each patch of a tree as applied or not",
        "vpatch status build/vllm-0.17.1",
        (5, 6, 9, 10),
    )
    p.add_argument(
        "dest",
        nargs="?",
        metavar="DIR",
        help="the tree (default: build/vllm-<newest patched>, the one `make apply` makes)",
    )
    series(p, "compare with the series in this folder")


def execute(args: Namespace, parser: Parser) -> int:
    from ..commands import apply

    show(apply.status(path(args.dest), path(args.series), pins=lock.load()))
    return 0
