"""`vpatch export`: a patched tree's commits into the patch set."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from .. import lock
from .options import Parser, Subparsers, command, path, show


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "export",
        execute,
        "write a patched tree's commits into the patch set",
        "vpatch export build/vllm-0.27.0",
        (5, 6, 9, 10, 11),
    )
    p.add_argument("dir", metavar="DIR", help="a vpatch tree (vpatch apply, then your commits)")
    p.add_argument(
        "--into",
        metavar="DIR",
        help="write a plain series folder here instead (new, empty, or one vpatch wrote)",
    )


def execute(args: Namespace, parser: Parser) -> int:
    from ..commands import export

    show(export.export(Path(args.dir), path(args.into), pins=lock.load()))
    return 0
