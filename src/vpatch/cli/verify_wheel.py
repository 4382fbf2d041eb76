"""`vpatch verify-wheel`: the CUDA archs of a wheel's extensions, its patched files."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from .. import lock
from ..errors import WheelError
from .options import Parser, Subparsers, command, offline, path, show


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "verify-wheel",
        execute,
        "CUDA archs in a wheel's extensions; patched files",
        "vpatch verify-wheel dist/vllm-0.17.1+eagle3.1a2b3c4d-cp38-abi3-*.whl --arch sm_100",
        (3, 4, 5, 6, 8, 9, 10, 11),
        {8: "a bad wheel, or verify-wheel found problems (listed)"},
    )
    p.add_argument("wheel", metavar="WHEEL")
    p.add_argument("--arch", help="required arch, e.g. sm_100 (default for CUDA wheels)")
    p.add_argument(
        "--tree", metavar="DIR", help="patched tree to compare the wheel's Python files with"
    )
    offline(p)


def execute(args: Namespace, parser: Parser) -> int:
    from ..commands import verify_wheel

    res = verify_wheel.verify_wheel(
        Path(args.wheel),
        arch=args.arch,
        tree=path(args.tree),
        offline=args.offline,
        pins=lock.load(),
    )
    show(res)
    if not res.ok:
        n = len(res.problems)
        raise WheelError(f"verify-wheel found {n} problem{'s' * (n != 1)} (listed above)")
    return 0
