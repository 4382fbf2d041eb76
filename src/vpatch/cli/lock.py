"""`vpatch lock`: the pinned releases, or --refresh their hashes."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from .options import Parser, Subparsers, command, say, show


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "lock",
        execute,
        "list the pinned releases, or --refresh their hashes",
        "vpatch lock",
        (3, 11),
    )
    p.add_argument("--refresh", action="store_true", help="rewrite hashes from the index")


def execute(args: Namespace, parser: Parser) -> int:
    from ..sources.refresh import Refreshed, refresh

    pins = lock.load()
    if args.refresh:
        pins = refresh(pins, say)
        lock.save(pins)
        show(Refreshed(pins))
        return 0
    show(pins)
    return 0
