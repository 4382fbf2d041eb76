"""`vpatch matrix`: how each patch of the newest series fares on each release."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from .options import Parser, Subparsers, command, count, offline, output, say, show


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "matrix",
        execute,
        "how each patch of the newest series fares on each release",
        "vpatch matrix --versions 0.32.0 0.33.0 --offline",
        (3, 4, 5, 9, 11),
    )
    p.add_argument(
        "--versions",
        # extend: `--versions a --versions b` is both (a plain store keeps b)
        action="extend",
        nargs="+",
        metavar="V",
        help="these releases (default: the lock's)",
    )
    output(p, "md", "json")
    p.add_argument(
        "--jobs",
        type=count(decimal=True),
        metavar="N",
        help="worker processes (default: one per core)",
    )
    offline(p)


def execute(args: Namespace, parser: Parser) -> int:
    from ..commands import matrix

    m = matrix.build(args.versions, pins=lock.load(), offline=args.offline, jobs=args.jobs, say=say)
    show(m, args.format)
    return 0
