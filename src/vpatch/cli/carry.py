"""`vpatch carry`: a new vLLM release, pinned, ported, linted and documented
as a proposed change of the patch set, with a report to review."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from ..errors import PatchError, TreeError
from .options import Parser, Subparsers, command, path, resume, say, show, source


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "carry",
        execute,
        "carry the patch set to a release the lock does not pin yet, as a change to review",
        "vpatch carry 0.34.0",
        (2, 3, 4, 5, 6, 9, 10, 11),
        {
            5: "a patch conflicts (the file and hunks said), or --write with lint problems",
            6: "--work is not carry's own folder, another carry works there, --continue "
            "without a conflict the carry stopped at, or --write on a checkout that "
            "changed since the carry copied it (nothing written)",
        },
    )
    p.add_argument("to_version", metavar="TO")
    p.add_argument(
        "--from",
        dest="from_version",
        metavar="FROM",
        help="default: the newest release with a series",
    )
    p.add_argument(
        "--write", action="store_true", help="write the proposed change into the checkout"
    )
    resume(p, "go on after you resolved a conflict in the port's work tree")
    p.add_argument("--work", metavar="DIR", help="work folder (default: build/carry-TO)")
    source(p, many=True)


def execute(args: Namespace, parser: Parser) -> int:
    from ..commands import carry
    from .docs import generated_here

    r = carry.carry(
        args.to_version,
        pins=lock.load(),
        from_version=args.from_version,
        work=path(args.work),
        write=args.write,
        resume=args.resume,
        source=args.source,
        extra=generated_here(parser),
        say=say,
    )
    show(r)
    if r.conflict:
        where = "; ".join(f"{f} ({', '.join(h) or 'no markers'})" for f, h in r.hunks.items())
        raise PatchError(
            f"{r.conflict} conflicts with vLLM {r.to_version} in {where}; resolve it in "
            f"{r.port_work}, `git add` it, `git am --continue` there, then run "
            f"`vpatch carry {r.to_version}{carry.again(r)} --continue`"
        )
    if args.write and r.problems:
        raise PatchError(
            f"lint found {len(r.problems)} problems; nothing was written (see {r.report})"
        )
    if r.unwritten:
        more = f" and {len(r.unwritten) - 1} more" if len(r.unwritten) > 1 else ""
        raise TreeError(
            f"the checkout {r.checkout} changed since the carry copied it: {r.unwritten[0]}"
            f"{more}; nothing was written (see {r.report})"
        )
    return 0
