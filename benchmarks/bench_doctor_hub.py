"""`vpatch doctor` on hub ids, cold cache, against the same pair on disk.

    make bench-doctor-hub
    PYTHONPATH=tests python -m benchmarks.bench_doctor_hub [--reps 7] [--python PY]
        [--max-ratio R]

Two pairs shaped like the public ones (tests/support/pairs.py), their
checkpoints sparse files of the real sizes:

  kimi      Kimi-K2.5 and a Llama EAGLE-3 drafter (lightseekorg's shape, 2 GB)
  mla-12g   Kimi-K2.5 and an MLA drafter in float32 with its embeddings,
            12 GB in 4 shards

published on the stand-in hub (tests/support/hub.py, a thread of this
process on 127.0.0.1). Each round, in alternating order, runs the CLI as a
user does (`vpatch doctor --target T --drafter D --python PY --format json`,
a child process) on the hub ids with HF_ENDPOINT at the stand-in and an
empty HF_HUB_CACHE, and on the two folders. Prints the medians, their
ratio and the bytes the hub served per run (and the CPU time of each, which
the machine's other jobs move less); the goals are <= 2x the local wall time
and < 1 MB. PY (default: a venv with support.env's small fake vLLM of
the newest pinned release, made here) is the serving environment doctor asks `vpatch check`
about, the same for both runs. Exit status 1 if --max-ratio is given and
not met, or a run served 1 MB or more.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from support import env as fake_env
from support import pairs as F
from support.hub import StandIn
from support.releases import newest

MB = 10**6
GOAL_RATIO = 2.0


def pairs(root: Path) -> dict[str, tuple[Path, Path]]:
    big = {k: ("F32", s) for k, (_, s) in F.mla_tensors(F.KIMI_VOCAB, F.KIMI_VOCAB).items()}
    big["embed_tokens.weight"] = ("F32", [F.KIMI_VOCAB, F.HIDDEN])
    return {
        "kimi": F.pair(root / "kimi", sparse=True),
        "mla-12g": F.pair(root / "mla", fmt="torchspec_mla", tensors=big, sparse=True, shards=4),
    }


def doctor(target: str, drafter: str, python: str, env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system, its children included: PY's
    probes) of one CLI run."""
    cmd = [sys.executable, "-m", "vpatch.cli", "doctor", "--target", target]
    cmd += ["--drafter", drafter, "--python", python, "--format", "json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return took, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--python", help="the serving environment's python (default: a fake vLLM)")
    ap.add_argument("--max-ratio", type=float, help="fail above this ratio hub / local")
    args = ap.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-doctor-hub-") as tmp:
        root = Path(tmp)
        python = args.python or str(fake_env.build_env(root / "venv", version=newest()))
        hub = StandIn()
        made = pairs(root / "pairs")
        for name, (t, d) in made.items():
            hub.add(f"bench/{name}-target", t)
            hub.add(f"bench/{name}-drafter", d)
        with hub.running():
            for name, (t, d) in made.items():
                size = sum(p.stat().st_size for p in d.glob("*.safetensors"))
                local: list[float] = []
                remote: list[float] = []
                cpu: dict[str, list[float]] = {"local": [], "hub": []}
                served: list[int] = []
                for i in range(args.reps + 1):  # the first round warms the OS's caches
                    env = {
                        "HF_ENDPOINT": hub.url,
                        "HF_HUB_CACHE": str(root / f"hf-{name}-{i}"),  # cold
                        "HF_HOME": str(root / f"home-{name}-{i}"),
                        "HF_TOKEN": "",
                    }
                    runs = [
                        ("local", str(t), str(d), {}),
                        ("hub", f"bench/{name}-target", f"bench/{name}-drafter", env),
                    ]
                    for kind, target, drafter, extra in runs if i % 2 else runs[::-1]:
                        hub.reset()
                        took, used = doctor(target, drafter, python, extra)
                        if i == 0:
                            continue
                        (remote if kind == "hub" else local).append(took)
                        cpu[kind].append(used)
                        if kind == "hub":
                            served.append(hub.served)
                lm, hm = statistics.median(local), statistics.median(remote)
                ratio = hm / lm
                most = max(served)
                print(
                    f"{name}: drafter checkpoint {size / 1e9:.1f} GB; doctor on folders "
                    f"{lm:.2f} s, on hub ids (cold cache) {hm:.2f} s: {ratio:.2f}x "
                    f"(goal <= {GOAL_RATIO:g}x: {'met' if ratio <= GOAL_RATIO else 'MISSED'}); "
                    f"served {most / 1e3:.1f} KB a run (goal < 1 MB: "
                    f"{'met' if most < MB else 'MISSED'}); medians of {args.reps}"
                )
                lc, hc = statistics.median(cpu["local"]), statistics.median(cpu["hub"])
                print(f"  CPU time: folders {lc:.2f} s, hub {hc:.2f} s: {hc / lc:.2f}x")
                print(f"  folders: {', '.join(f'{x:.2f}' for x in local)}")
                print(f"  hub:     {', '.join(f'{x:.2f}' for x in remote)}")
                failed |= most >= MB or (args.max_ratio is not None and ratio > args.max_ratio)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
