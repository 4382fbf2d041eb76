"""The patched-vLLM tier as a program (the work is vllm_tier's). Run it with
the project's python (``.venv/bin/python``: it imports vpatch).

    tier.py run [--out DIR] [--check NAME]... [-- CMD...]
                                          build, run every check's inner runs
                                          ($VLLM, else the default releases;
                                          --check: that check's alone),
                                          write DIR/results.json (default
                                          build/tier); with CMD: run CMD beside
                                          them (one core is CMD's until it ends),
                                          this program's output in DIR/tier.log
    tier.py report [--full] [DIR|FILE]    every check's verdict on what ran
    tier.py prepare [--release X] [--patched] [--print-env]
                                          build a release's installs; `export`
                                          lines for a run by hand
    tier.py docs [--check] [--root DIR] [--paths]
                                          write the tier's generated tables
                                          (vllm_tier.docs); --check: exit 1
                                          naming those that are stale; --root:
                                          those of DIR, a copy of the checkout
                                          (a carry's proposed/), made from its
                                          data; --paths: print their docs

``run`` exits with CMD's status if CMD failed, else 0 once the results are
written: the verdicts are test_releases.py's (``VPATCH_TIER_RESULTS=FILE
pytest tests/vllm/test_releases.py``). Interrupted (SIGINT, SIGTERM, SIGHUP),
or when its parent or its parent's parent goes away (make, and the shell of
make's recipe), it kills everything it started and exits.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from vllm_tier import (
    REPO,
    TierError,
    docs,
    log,
    models,
    plan,
    prepare,
    releases,
    runner,
    targets,
    venvs,
)
from vllm_tier.log import say
from vllm_tier.results import Results
from vllm_tier.runenv import runtime_env
from vllm_tier.session import Session
from vllm_tier.verdicts import report
from vpatch import resources
from vpatch.errors import VpatchError
from vpatch.paths import write_atomic

OUT = REPO / "build" / "tier"
RESULTS = "results.json"
SHOWN = (
    "VLLM",
    "VPATCH",
    "HF_",
    "TRANSFORMERS",
    "PYTHONPATH",
    "TOKENIZERS",
    "TORCHDYNAMO",
    "LD_PRELOAD",
    "TRITON",
)


def cmd_run(args: argparse.Namespace) -> int:
    selected = releases.selected()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULTS).unlink(missing_ok=True)
    wanted = plan.plan(selected)
    if args.check:
        wanted = plan.only(wanted, args.check)
        if not wanted:
            why = "; ".join(f"{c}: {plan.why_none(c, selected)}" for c in args.check)
            raise TierError(f"no selected release runs {', '.join(args.check)} ({why})")
    log.guard()
    beside = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    stdout = os.dup(1)
    if beside:  # the command's output is the terminal's, ours the log's
        fd = os.open(out / "tier.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        stderr = os.dup(2)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    where = f"; its log: {out / 'tier.log'}" if beside else ""
    n = sum(map(len, wanted.values()))
    os.write(stdout, f"tier: {n} checks on {', '.join(wanted)}{where}\n".encode())
    status: dict[str, int | None] = {}
    done = threading.Thread()
    if beside:
        runner.SLOTS.acquire()  # the command's core, until it ends

        def run_beside() -> None:
            proc = log.spawn(beside, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
            status["cmd"] = log.wait(proc)
            runner.SLOTS.release()
            say(f"{' '.join(beside)}: exit {status['cmd']}")

        done = threading.Thread(target=run_beside, name="beside")
        done.start()
    runs = Session(out, selected, wanted)
    took = prepare.ahead(wanted, then=runs.start)
    say(f"built in {took:.0f}s; {len(runs.runs)} inner runs started")
    for release, checks in wanted.items():  # what failed to build ahead: in line, its error kept
        for check in checks:
            if not runs.started(check, release):
                runs.build_and_start(check, release)
    runs.finish()
    results = runs.results()
    results.save(out / RESULTS)
    say(f"results: {out / RESULTS}")
    if done.is_alive():
        done.join()
    os.write(stdout, (report(results) + f"\nresults: {out / RESULTS}\n").encode())
    rc = status.get("cmd") or 0
    return 128 - rc if rc < 0 else rc  # killed by signal N: 128 + N, as a shell says


def cmd_report(args: argparse.Namespace) -> int:
    path = Path(args.path)
    print(report(Results.load(path / RESULTS if path.is_dir() else path), full=args.full))
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    wanted = releases.selected(" ".join(args.release) if args.release else None)
    fixtures = None if args.no_fixtures else models.ensure(wanted[0])
    made = {}
    for release in wanted:
        made[release] = targets.target(release, False)
        if args.patched:
            made[release] = targets.target(release, True)
    say(f"environment ready in {time.monotonic() - t0:.0f}s")
    if args.print_env:
        first = wanted[0]
        env = runtime_env(made[first], fixtures, first)
        # unpatched, the inner conftest makes each patch-effect test a strict xfail
        env["VPATCH_VLLM_VARIANT"] = "patched" if args.patched else "unpatched"
        for k in sorted(env):
            if k.startswith(SHOWN):
                print(f"export {k}={env[k]!s}")
        print(f"alias vpy={venvs.python(first)}")
    else:
        for release, path in made.items():
            print(f"{release}\t{venvs.python(release)}\t{path}")
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve() if args.root else REPO
    if args.root:
        # the copy's own lock and rules.toml make its tables: vpatch reads
        # them from VPATCH_ROOT (nothing has read the lock yet)
        os.environ["VPATCH_ROOT"] = str(root / resources.DATA)
    if args.paths:
        print("\n".join(docs.paths()))
        return 0
    found = docs.generated(root)
    stale = [label for _, _, changed in found.values() for label in changed]
    if args.check:
        for label in stale:
            print(f"stale: {label}")
        if stale:
            print(
                f"tier: {len(stale)} generated tables are stale: run `make docs`", file=sys.stderr
            )
            return 1
        print("tier docs: every generated table is up to date")
        return 0
    for path, (before, now, _) in found.items():
        if now != before:
            write_atomic(root / path, now.encode())
            print(f"wrote {path}")
    if not stale:
        print("tier docs: every generated table is up to date")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tier.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="build and run the checks' inner runs, write the results")
    p.add_argument("--out", default=str(OUT), help=f"results and logs (default: {OUT})")
    p.add_argument(
        "--check", action="append", metavar="NAME", help="run this check only (repeatable)"
    )
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD...: a command to run beside")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("report", help="every check's verdict on a results file")
    p.add_argument("path", nargs="?", default=str(OUT), help=f"DIR or FILE (default: {OUT})")
    p.add_argument("--full", action="store_true", help="every row of each table")
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("prepare", help="build (or reuse) the installs of some releases")
    p.add_argument("--release", action="append", help="default: $VLLM, else the tier's")
    p.add_argument("--patched", action="store_true", help="also make the patched install")
    p.add_argument("--no-fixtures", action="store_true")
    p.add_argument("--print-env", action="store_true", help="`export` lines for the first release")
    p.set_defaults(fn=cmd_prepare)
    p = sub.add_parser("docs", help="write the tier's generated tables in the docs")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if any is stale")
    p.add_argument("--root", metavar="DIR", help="a copy of the checkout: its data, its docs")
    p.add_argument("--paths", action="store_true", help="print the docs the tables are in")
    p.set_defaults(fn=cmd_docs)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except (TierError, VpatchError) as e:
        print(f"tier: error: {e}", file=sys.stderr)
        return 2
    finally:  # nothing outlives the program, whatever ended it
        log.kill_all()


if __name__ == "__main__":
    sys.exit(main())
