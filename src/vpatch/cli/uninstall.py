"""`vpatch uninstall`: restore the vLLM files `vpatch install` replaced."""

from __future__ import annotations

from argparse import Namespace

from .options import Parser, Subparsers, command, dry_run, python, say, show


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "uninstall",
        execute,
        "restore the vLLM files vpatch install replaced",
        "vpatch uninstall --python /opt/vllm/bin/python",
        (6, 11),
    )
    python(p)
    dry_run(p)


def execute(args: Namespace, parser: Parser) -> int:
    from ..env import install

    show(install.uninstall(args.python, dry_run=args.dry_run, say=say))
    return 0
