"""`vpatch lint`: the patch set's files, DEP-3, every release up to date."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from ..errors import PatchError
from .options import Parser, Subparsers, command, offline, say, show


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "lint",
        execute,
        "check the patch set: files, DEP-3, every release up to date",
        "vpatch lint --offline",
        (3, 4, 5, 9, 11),
        {5: "lint found problems (listed)"},
    )
    offline(p, "skip releases not in the cache")


def execute(args: Namespace, parser: Parser) -> int:
    from ..maintain import lint

    pins = lock.load()
    # doctor's rules, validated against the lock at load as every command
    # that reads them does (`newest` a pinned release): bad data is exit 2
    # here too, not a clean lint
    pins.rules  # noqa: B018
    result = lint.lint(pins, offline=args.offline, say=say)
    for note in result.skipped:
        say(f"skipped: {note}")
    show(result)
    if result.problems:
        raise PatchError(f"lint found {len(result.problems)} problems (listed above)")
    return 0
