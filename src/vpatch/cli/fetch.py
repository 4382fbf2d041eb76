"""`vpatch fetch`: download a pinned release's source into the cache."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from .options import Parser, Subparsers, command, offline, path, say, show, source, version


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "fetch",
        execute,
        "download a pinned release's source into the cache",
        "vpatch fetch 0.17.1 --dest vllm-0.17.1",
        (3, 4, 6, 7, 9, 10, 11),
    )
    version(p)
    p.add_argument(
        "--dest",
        metavar="DIR",
        help="also write the unpatched tree into this empty folder "
        "(`vpatch apply` with the same --dest and --source patches it there)",
    )
    source(p)
    offline(p)


def execute(args: Namespace, parser: Parser) -> int:
    from ..commands import apply

    fetched = apply.fetch(
        args.version, args.source, path(args.dest), args.offline, args.remote, say, pins=lock.load()
    )
    show(fetched)
    return 0
