"""`vpatch series`: a release's series as plain files (git am, patch -p1)."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from .. import lock
from .options import Parser, Subparsers, command, show, version


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "series",
        execute,
        "write a release's series as plain files (git am, patch -p1)",
        "vpatch series 0.17.1 --out series-0.17.1",
        (5, 6, 11),
    )
    version(p)
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="folder for NNNN-<slug>.patch and `series` (new, empty, or one vpatch wrote)",
    )


def execute(args: Namespace, parser: Parser) -> int:
    from ..commands import export

    show(export.render(args.version, Path(args.out), pins=lock.load()))
    return 0
