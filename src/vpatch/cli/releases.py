"""`vpatch releases`: the vLLM releases the package index has beyond the
lock, each with the `vpatch carry` that takes it (sources/releases.py)."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from .options import Parser, Subparsers, command, output, show

# `dnf check-update`'s code for "updates are available": clear of errors.py's
# codes (1-11), 70, 130 and 141, so a script tells "carry" from "failed"
NEW = 100


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "releases",
        execute,
        "list the vLLM releases the package index has beyond the lock, and the carry of each",
        "vpatch releases --format json",
        (3,),
        {
            0: "up to date: no release beyond the newest the lock pins",
            NEW: "new releases: carry proposed (a `vpatch carry` line each, oldest first)",
        },
    )
    # the rule as sources/releases.py applies it, and index.TIMEOUT and its default
    # (test_releases holds them equal): the parser imports no library
    p.description = (
        f"{p.description} A release is a final one (post-releases count; pre-releases, dev "
        "and local versions do not) with a file that is not yanked, on the index of pip's "
        "configuration, newer than the newest release VERSIONS.lock pins. The page is read "
        "within VPATCH_INDEX_TIMEOUT seconds (default 60)."
    )
    output(p, "text", "json")


def execute(args: Namespace, parser: Parser) -> int:
    from ..sources.releases import Beyond, beyond

    pins = lock.load()
    found = Beyond(pins.versions()[-1], beyond(pins))
    show(found, args.format)
    return NEW if found.new else 0
