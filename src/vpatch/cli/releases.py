"""`vpatch releases`: the vLLM releases the package index has beyond the
lock, each with the `vpatch carry` that takes it (sources/releases.py)."""

from __future__ import annotations

import json
from argparse import Namespace

from .. import lock
from .options import Parser, Subparsers, command, output

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
    from ..sources.releases import beyond

    pins = lock.load()
    newest = pins.versions()[-1]
    new = beyond(pins)
    carries = [f"vpatch carry {v}" for v in new]
    if args.format == "json":
        print(json.dumps({"newest_pinned": newest, "new": new, "carry": carries}, indent=2))
    elif not new:
        print(f"up to date: VERSIONS.lock pins vLLM up to {newest}; the package index has no newer")
    else:
        them = "1 newer release" if len(new) == 1 else f"{len(new)} newer releases"
        print(
            f"VERSIONS.lock pins vLLM up to {newest}; the package index has {them}. "
            "Carry one at a time, oldest first, each landed before the next:"
        )
        print("\n".join(f"  {c}" for c in carries))
    return NEW if new else 0
