"""What the command modules of the CLI share: the parser type, how a command
is declared (its help, exit codes and example), the options several
commands take, each defined here once, `say` (progress, on stderr) and
`show` (a command's result, on stdout: the one way to the screen).

A command module calls `command()` in its `add_parser`, then adds its
options: its own with `add_argument`, shared ones with the functions
below (`version(p)`, `source(p)`, `offline(p)`...), so that a flag, its
metavar and its default are written once whichever command takes it."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeAlias

from .. import lock, settings, untrusted
from ..errors import ConfigError, VpatchError
from ..shown import Shown

INTERRUPTED = 130  # 128 + SIGINT, as shells report it
ERRORS_DOC = "docs/install.md, Errors and exit codes"

Execute = Callable[[argparse.Namespace, "Parser"], int]


def say(msg: str) -> None:
    """Progress on stderr, escaped as every line vpatch prints (untrusted.text)."""
    print(untrusted.text(msg), file=sys.stderr, flush=True)


def show(result: Shown, format: str = "text") -> None:
    """The one way a command's result reaches stdout (shown.py): its JSON
    with `format` json, as read; else its lines, each through untrusted.text
    (a newline or an escape sequence a server sent stays in its line,
    escaped; a URL's credential is not shown)."""
    if format == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        print("\n".join(untrusted.text(line) for line in result.lines()))


PATHS = ("DIR", "FILE", "WHEEL", "PATH")  # metavars of path arguments


def path(value: str | None) -> Path | None:
    return Path(value) if value else None


def a_path(value: str) -> str:
    """A path argument's value. An empty one would be the current folder
    (`Path('')` is `.`: `series --out ''` wrote there) or, for an option with
    a default, the default: either way not what was typed."""
    if not value:
        raise argparse.ArgumentTypeError("an empty path (`.` names the current folder)")
    return value


def count(least: int = 1, most: int = settings.MOST, decimal: bool = False) -> Callable[[str], int]:
    """An argparse type: a whole number from `least` to `most`, read by
    settings.whole (the one bounded parser; `decimal`: ASCII digits only, a
    vpatch option's own, where one of vLLM's flags reads as int() does) and
    refused as argparse refuses a value: one line naming the option, exit 2."""

    def whole(value: str) -> int:
        try:
            return settings.whole(value, "", least, most, decimal=decimal)
        except ConfigError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return whole


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error said like any other: one line, exit 2
    (ConfigError's code, and argparse's), pointing to the command's --help.
    An argument whose metavar names a path (DIR, FILE, WHEEL, ...|PATH)
    refuses an empty value (a_path)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        metavar = kwargs.get("metavar")
        if isinstance(metavar, str) and metavar.split("|")[-1] in PATHS:
            kwargs.setdefault("type", a_path)
        return super().add_argument(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        said = untrusted.text(cut(message))
        print(f"vpatch: error: {said} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(ConfigError.exit_code)


Subparsers: TypeAlias = "argparse._SubParsersAction[Parser]"


def cut(message: str, limit: int = 200) -> str:
    """The message's first line, with a word over `limit` characters (a
    pasted blob given as an argument) cut: the line stays readable."""
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    return re.sub(
        rf"\S{{{limit + 1},}}", lambda m: f"{m.group()[:80]}…({len(m.group())} characters)", first
    )


def codes(shown: tuple[int, ...], own: dict[int, str]) -> str:
    """A command's exit codes, each with what it means: errors.py's kinds,
    or the command's own meaning of one (`own`)."""
    from .. import errors

    kinds = {
        c.exit_code: c.kind
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, VpatchError) and "kind" in vars(c)
    }
    said = {0: "done", **kinds, INTERRUPTED: "interrupted (rolled back)", **own}
    listed = sorted({0, ConfigError.exit_code, *shown, *own, INTERRUPTED})
    return "\n".join(f"  {c:<4} {said[c]}" for c in listed)


def command(
    sub: Subparsers,
    name: str,
    execute: Execute,
    help: str,
    example: str,
    exits: tuple[int, ...],
    own: dict[int, str] | None = None,
) -> Parser:
    """Declare `vpatch NAME`: `help` is its line in `vpatch --help` and (a
    sentence) its description; `exits` the exit codes of errors.py it may
    end with, `own` those it gives a meaning of its own; `example` a
    command line the parser takes. `execute(args, parser)` runs it."""
    p = sub.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog=f"exit codes ({ERRORS_DOC}):\n{codes(exits, own or {})}\n\nexample:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=execute)
    return p


# -- the options several commands take ---------------------------------------------

PYTHON_HELP = (
    "the environment's interpreter (default: python3 on PATH, the active venv); "
    "it must answer within VPATCH_PYTHON_TIMEOUT seconds (default 120)"
)


def version(p: Parser) -> None:
    """VERSION: a pinned release, optional."""
    p.add_argument(
        "version", nargs="?", metavar="VERSION", help="release (default: the newest patched one)"
    )


def source(p: Parser, many: bool = False) -> None:
    """--source: where a release's source comes from (lock.SOURCES, or a
    folder), with --remote for `git`; `many`: the releases' of a command
    that takes two or more (no folder, no remote)."""
    if many:
        # a folder is one release's tree, and would stand for every release
        # (`carry --source DIR` took it as FROM's and TO's); '' was the current one
        p.add_argument(
            "--source",
            default="auto",
            choices=lock.SOURCES,
            metavar="SOURCE",
            help=f"where the releases' source comes from: {'|'.join(lock.SOURCES)}",
        )
        return
    p.add_argument(
        "--source",
        default="auto",
        metavar="SOURCE",
        help=f"where the release's source comes from: {'|'.join(lock.SOURCES)} or a folder "
        "(default: auto = sdist, else the wheel)",
    )
    p.add_argument(
        "--remote", metavar="URL", help=f"git remote for --source git (default {lock.VLLM_REMOTE})"
    )


def offline(p: Parser, help: str = "use the cache only") -> None:
    p.add_argument("--offline", action="store_true", help=help)


def series(p: Parser, help: str) -> None:
    """--series DIR: a folder's series (a `series` file and its patches)
    instead of the patch set's."""
    p.add_argument("--series", metavar="DIR", help=help)


def python(p: Parser, default: str | None = None) -> None:
    """--python PY: the environment a command looks into."""
    p.add_argument("--python", default=default, metavar="PY", help=PYTHON_HELP)


def output(p: Parser, *formats: str) -> None:
    """--format: the first of `formats` by default."""
    p.add_argument("--format", choices=formats, default=formats[0])


def dry_run(p: Parser, help: str = "say what would change; change nothing") -> None:
    p.add_argument("--dry-run", action="store_true", help=help)


def resume(p: Parser, help: str) -> None:
    """--continue (args.resume): go on after the user resolved a conflict."""
    p.add_argument("--continue", dest="resume", action="store_true", help=help)
