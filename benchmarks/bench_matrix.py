"""Warm time of `vpatch matrix` over every release in VERSIONS.lock.

    make bench-matrix
    python -m benchmarks.bench_matrix [--reps 3] [--jobs N] [--max-seconds S]

One untimed run first fills the caches (downloads, and the few files each
release contributes under <cache>/files/); then --reps timed runs of the
whole matrix, in this process, as `vpatch matrix` does it. Prints every
time, the median and the goal (<= 10 s for >= 8 releases). Exit status 1 if
the median exceeds --max-seconds (default: report only).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from vpatch import lock
from vpatch.commands import matrix

GOAL = 10.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--jobs", type=int, help="worker processes (default: one per core)")
    ap.add_argument("--max-seconds", type=float, help="fail when the median is above this")
    args = ap.parse_args(argv)

    pins = lock.load()
    t = time.perf_counter()
    m = matrix.build(pins=pins, jobs=args.jobs)
    print(f"first run (fills the cache when cold): {time.perf_counter() - t:.2f} s")
    times = []
    for _ in range(args.reps):
        t = time.perf_counter()
        again = matrix.build(pins=pins, jobs=args.jobs)
        times.append(time.perf_counter() - t)
        assert again.releases == m.releases, "the matrix changed between runs"
    med = statistics.median(times)
    shown = ", ".join(f"{x:.2f}" for x in times)
    print(
        f"warm matrix: {len(m.releases)} releases x {len(m.patches)} patches: "
        f"median {med:.2f} s ({shown}); goal <= {GOAL:.0f} s: {'met' if med <= GOAL else 'MISSED'}"
    )
    if args.max_seconds is not None and med > args.max_seconds:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
