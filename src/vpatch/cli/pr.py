"""`vpatch pr`: draft the vLLM pull request of what upstream still lacks."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from ..errors import PatchError
from .options import Parser, Subparsers, command, offline, path, resume, say, show, source


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "pr",
        execute,
        "draft the vLLM pull request of what upstream still lacks",
        "vpatch pr --onto 0.33.0 --patch mla-detect-kimi-k2-eagle-drafters",
        (3, 4, 5, 6, 9, 10, 11),
    )
    p.add_argument("--onto", required=True, metavar="VERSION|PATH", help="a release or a checkout")
    p.add_argument(
        "--out", metavar="DIR", help="PR_BODY.md and series/ go here (default: pr); a release too"
    )
    p.add_argument("--signoff", metavar="'NAME <EMAIL>'", help="default: git's user.name/email")
    resume(p, "after a conflict")
    p.add_argument(
        "--results",
        metavar="FILE",
        help="the tier's results to quote (tests/vllm/tier.py run: build/tier/results.json)",
    )
    p.add_argument(
        "--patch",
        action="append",
        metavar="SLUG",
        help="send this patch alone (again for more); default: every one upstream lacks",
    )
    source(p, many=True)
    offline(p)


def execute(args: Namespace, parser: Parser) -> int:
    from ..pr import draft

    pins = lock.load()
    out, signoff, results = path(args.out), args.signoff, path(args.results)
    if args.resume:
        d = draft.resume(
            args.onto,
            out=out,
            signoff=signoff,
            offline=args.offline,
            results=results,
            say=say,
            pins=pins,
        )
    else:
        d = draft.draft(
            args.onto,
            pins=pins,
            out=out,
            signoff=signoff,
            source=args.source,
            offline=args.offline,
            only=tuple(args.patch or ()),
            results=results,
            say=say,
        )
    show(d)
    if d.conflict:
        again = "".join(
            f" --{k} {v!r}" for k in ("out", "signoff", "results") if (v := getattr(args, k))
        )
        raise PatchError(
            f"{d.conflict.patch.name} conflicts with {d.target} in {', '.join(d.unresolved)}; "
            f"resolve it in {d.tree} (branch {d.branch}), `git add` it, `git am --continue`, "
            f"then run `vpatch pr --onto {args.onto}{again} --continue`"
        )
    return 0
