"""`vpatch docs`: the docs' generated tables, written or --check'ed; the
README's command list (synopsis) is made here, from the parser."""

from __future__ import annotations

import argparse
from argparse import Namespace
from typing import TYPE_CHECKING

from .. import lock
from ..errors import PatchError
from .options import Parser, Subparsers, command, show

if TYPE_CHECKING:
    from ..maintain.docs import Block


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "docs",
        execute,
        "write the docs' generated tables (README, docs/patches.md, docs/doctor.md)",
        "vpatch docs --check",
        (5, 11),
        {5: "--check: a generated part is stale (listed)"},
    )
    p.add_argument("--check", action="store_true", help="name the stale ones; write nothing")


def execute(args: Namespace, parser: Parser) -> int:
    from ..maintain import docs

    pins, extra = lock.load(), generated_here(parser)
    if args.check:
        found = docs.Generated(stale=tuple(docs.stale(pins=pins, extra=extra)))
        show(found)
        if found.stale:
            n = len(found.stale)
            raise PatchError(f"{n} generated parts of the docs are stale: run `make docs`")
        return 0
    show(docs.Generated(written=tuple(docs.write(pins=pins, extra=extra))))
    return 0


def generated_here(ap: Parser) -> tuple[Block, ...]:
    """The generated parts of the docs only the CLI can make: the README's
    command list, from the parser (`vpatch docs` writes them with the rest)."""
    from ..maintain.docs import Block

    return (Block("README.md", "commands", f"```\n{synopsis(ap)}```"),)


def synopsis(ap: Parser) -> str:
    """The command list README.md carries (between its `commands` markers),
    from the parser: one line per command, its arguments as --help names
    them, wrapped at 100 characters."""
    lines = []
    for name, p in ap.commands.items():  # type: ignore[attr-defined]
        words = [f"vpatch {name}"]
        # a trailing command (doctor's `-- vllm serve ...`) after the options
        last = [a for a in p._actions if not a.option_strings and a.nargs == "*"]
        for a in [a for a in p._actions if a not in last] + last:
            if isinstance(a, argparse._HelpAction):
                continue
            if not a.option_strings:
                metavar = a.metavar if isinstance(a.metavar, str) else a.dest.upper()
                words.append(f"[{metavar}]" if a.nargs in ("?", "*") else metavar)
                continue
            flag = max(a.option_strings, key=len)
            if a.nargs == 0:
                item = flag
            else:
                shown = a.metavar or ("|".join(a.choices) if a.choices else a.dest.upper())
                more = a.nargs == "+" or isinstance(a, argparse._AppendAction)
                item = f"{flag} {shown}" + (" ..." if more else "")
            words.append(item if a.required else f"[{item}]")
        line = ""
        for w in words:
            if line and len(line) + 1 + len(w) > 100:
                lines.append(line)
                line = " " * 7
            line = f"{line} {w}" if line.strip() else line + w
        lines.append(line)
    return "\n".join(lines) + "\n"
