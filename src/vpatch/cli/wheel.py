"""`vpatch wheel`: an installable wheel of a patched release."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from .. import lock
from .options import Parser, Subparsers, command, dry_run, offline, path, say, series, show, version


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "wheel",
        execute,
        "an installable wheel of a patched release",
        "vpatch wheel 0.17.1 --variant cuda --out dist",
        (3, 4, 5, 6, 8, 9, 11),
    )
    version(p)
    p.add_argument("--variant", choices=("cuda", "cpu"), default="cuda")
    p.add_argument(
        "--mode",
        choices=("overlay", "source"),
        default="overlay",
        help="overlay: patch the official wheel's Python files (seconds); "
        "source: build from the patched tree with TORCH_CUDA_ARCH_LIST=10.0 (hours)",
    )
    p.add_argument("--out", default="dist", metavar="DIR", help="output folder (default: dist)")
    series(p, "use the series in this folder instead")
    dry_run(p, "source mode: print, don't build")
    offline(p)


def execute(args: Namespace, parser: Parser) -> int:
    from ..commands import wheel

    built = wheel.build(
        args.version,
        variant=args.variant,
        mode=args.mode,
        out=Path(args.out),
        series_dir=path(args.series),
        dry_run=args.dry_run,
        offline=args.offline,
        say=say,
        pins=lock.load(),
    )
    show(built)
    return 0
