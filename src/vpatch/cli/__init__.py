"""The `vpatch` command: argparse over one module a command (cli/<name>.py,
as auditwheel's main_<cmd>.py), each with a parser part (`add_parser`:
its help, exit codes, example and options) and an execute part (`execute`:
call its command module, or the one library function that does the whole
job, and show what it returns: options.show, the one way to stdout). The
options several commands take are defined once, in cli/options.py. Errors
are caught once, in main(): one line `vpatch: error: ...` and the error's
exit code (errors.py), its text through untrusted.text (a message may
quote what a server sent, or a URL with a credential in it).

The modules: options, and one a command, named as the command is
(verify_wheel: `vpatch verify-wheel`) and registered in COMMANDS below,
which names them.

Each execute imports what it calls when it runs (as pip loads its
commands): `vpatch install` in an image should not pay for the wheel code,
the matrix or GitPython. It loads VERSIONS.lock (and, through it, the patch
set) once, with lock.load(), and passes it down as `pins`: nothing below the
CLI loads it again, and a cli module imports only what it calls
(tests/unit/test_layers.py).

To add a command: write cli/<name>.py (add_parser and execute, as the
others), and list it in COMMANDS, in the order `vpatch --help` shows."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from .. import gitutil, untrusted
from ..errors import VpatchError, disk_error
from ..shown import Shown
from . import (
    apply,
    carry,
    check,
    docs,
    doctor,
    export,
    fetch,
    install,
    lint,
    matrix,
    port,
    pr,
    releases,
    series,
    status,
    unapply,
    uninstall,
    verify_wheel,
    wheel,
)
from . import lock as lock_command
from .options import INTERRUPTED, Parser, cut, say, show

if TYPE_CHECKING:
    from ..lock import Lock
    from ..maintain.docs import Block

__all__ = ["BROKEN_PIPE", "COMMANDS", "INTERNAL", "INTERRUPTED", "main", "parser", "say"]

INTERNAL = 70  # EX_SOFTWARE: a bug in vpatch
BROKEN_PIPE = 141  # 128 + SIGPIPE: stdout closed early, as `yes | head -1` ends yes

# The commands, in the order `vpatch --help` and the README list them.
COMMANDS = (
    fetch,
    apply,
    status,
    unapply,
    lock_command,
    matrix,
    port,
    releases,
    carry,
    export,
    series,
    lint,
    docs,
    pr,
    wheel,
    verify_wheel,
    install,
    uninstall,
    check,
    doctor,
)


class _Version(argparse.Action):
    """`vpatch --version`: the tool, and the patch set it carries."""

    def __init__(self, option_strings: list[str], dest: str, **kw: Any) -> None:
        kw.update(nargs=0, default=argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        parser.exit(_guarded(_print_version))


def _print_version() -> int:
    from importlib import metadata

    from ..lock import load

    try:
        version = metadata.version("vpatch")
    except metadata.PackageNotFoundError:
        version = "(not installed: run from its source)"
    show(_About(version, load()))
    return 0


@dataclass(frozen=True)
class _About(Shown):
    """`vpatch --version`: the tool, and the patch set it carries."""

    version: str
    pins: Lock

    def lines(self) -> list[str]:
        pins, ps = self.pins, self.pins.patchset
        files = [v for vs in ps.variants.values() for v in vs]
        statuses = Counter(r.status for r in pins.releases.values())
        versions, default = pins.versions(), pins.default()
        return [
            f"vpatch {self.version}",
            f"patch set {pins.identity()[:12]} "
            "(sha256 of VERSIONS.lock, patches.toml, the patches)",
            f"  releases  {len(versions)} pinned, {versions[0]}-{versions[-1]}: "
            + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())),
            f"  patches   {len(ps.slugs)}, in {len(files)} files; the default release, "
            f"{default.version}, gets {len(ps.carried(default.version))}",
            f"  data      {pins.root}",
        ]


def parser() -> Parser:
    ap = Parser(
        prog="vpatch",
        description="EAGLE-3 for DeepSeek-V3 / Kimi-K2.5 targets on vLLM: the patches and tools.",
        epilog="`vpatch COMMAND --help` gives a command's options, exit codes and an example.",
    )
    ap.add_argument(
        "-V", "--version", action=_Version, help="the version, and the patch set it carries"
    )
    sub = ap.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    ap.commands = dict(sub.choices)  # type: ignore[attr-defined]  # name -> its parser (see main)
    return ap


def generated_here() -> tuple[Block, ...]:
    """The generated parts of the docs only the CLI can make (cli/docs.py)."""
    return docs.generated_here(parser())


def main(argv: list[str] | None = None) -> int:
    """The `vpatch` command: the exit code. stdout closed early (`vpatch
    lock | head -1`): silent, exit 128 + SIGPIPE, as a tool SIGPIPE ends."""
    try:
        try:
            return _guarded(lambda: _dispatch(argv))
        finally:
            sys.stdout.flush()  # here, not at exit: a closed pipe is said nowhere
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's own flush at exit
        return BROKEN_PIPE


def _dispatch(argv: list[str] | None) -> int:
    ap = parser()
    args, extra = ap.parse_known_args(argv)
    if extra:  # said by the command's own parser, pointing to its --help
        ap.commands[args.subcommand].error(f"unrecognized arguments: {' '.join(extra)}")  # type: ignore[attr-defined]
    gitutil.scrub_environ()
    code: int = args.func(args, ap)
    return code


def _guarded(run: Callable[[], int]) -> int:
    """run(), every failure said in one line with its exit code."""
    try:
        return run()
    except VpatchError as e:  # one line by contract: a newline in it is a server's, shown
        return _fail(untrusted.text(str(e)), e.exit_code)
    except KeyboardInterrupt:
        return _fail("interrupted; nothing was left half done", INTERRUPTED)
    except BrokenPipeError:
        raise  # main's: stdout went away
    except OSError as e:  # a file-system error no command converted itself
        err = disk_error(e)
        return _fail(untrusted.text(str(err)), err.exit_code)
    except Exception as e:  # a bug: still one line, the traceback on request
        if os.environ.get("VPATCH_DEBUG"):
            traceback.print_exc()
        return _fail(
            f"internal error: {type(e).__name__}: {e} (VPATCH_DEBUG=1 shows the traceback)",
            INTERNAL,
        )


def _fail(message: str, code: int) -> int:
    """The one error line: the message's first line (a bug's may have more),
    escaped (untrusted.text: no control character reaches the terminal, no
    credential of a URL is shown)."""
    print(f"vpatch: error: {untrusted.text(cut(message))}", file=sys.stderr)
    return code
