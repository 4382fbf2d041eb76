"""`vpatch lock`: the pinned releases, or --refresh their hashes."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from .options import Parser, Subparsers, command, say


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
    from ..sources.refresh import refresh

    pins = lock.load()
    if args.refresh:
        pins = refresh(pins, say)
        lock.save(pins)
        print(f"{pins.path.name}: {len(pins.releases)} releases refreshed")
        return 0
    default = pins.default().version
    for v in pins.versions():
        r = pins.releases[v]
        mark = "  (default)" if v == default else ""
        print(f"{v:8} {r.status:12} {r.tag:9} {r.commit:10} {', '.join(r.artifacts)}{mark}")
    return 0
