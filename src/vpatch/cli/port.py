"""`vpatch port`: carry a release's series to another release (3-way)."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from ..errors import PatchError
from .options import Parser, Subparsers, command, offline, path, resume, say, show, source


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "port",
        execute,
        "carry a release's series to another release (3-way)",
        "vpatch port 0.32.0 0.33.0",
        (3, 4, 5, 6, 9, 10, 11),
    )
    p.add_argument("from_version", metavar="FROM")
    p.add_argument("to_version", metavar="TO")
    resume(p, "export a port whose conflicts you resolved")
    p.add_argument("--work", metavar="DIR", help="work tree (default: build/port-TO)")
    p.add_argument(
        "--into", metavar="DIR", help="write a plain series folder here (default: the patch set)"
    )
    p.add_argument("--keep", action="store_true", help="keep the work tree after a clean port")
    source(p, many=True)
    offline(p)


def execute(args: Namespace, parser: Parser) -> int:
    from ..maintain import port

    pins = lock.load()
    work, into = path(args.work), path(args.into)
    if args.resume:
        r = port.resume(
            args.from_version, args.to_version, pins=pins, work=work, into=into, keep=args.keep
        )
    else:
        r = port.port(
            args.from_version,
            args.to_version,
            pins=pins,
            work=work,
            into=into,
            keep=args.keep,
            from_source=args.source,
            to_source=args.source,
            offline=args.offline,
            say=say,
        )
    show(r)
    if r.conflict:
        again = "".join(f" --{k} {v}" for k in ("work", "into") if (v := getattr(args, k)))
        raise PatchError(
            f"{r.conflict} conflicts with vLLM {r.to_version} in {', '.join(r.unresolved)}; "
            f"resolve it in {r.work}, `git add` it, `git am --continue`, then run "
            f"`vpatch port {r.from_version} {r.to_version}{again} --continue`"
        )
    return 0
