"""Benchmark (not a test): forward time of the tiny DeepSeek-V3 on CPU, patched
vs unpatched vLLM, with no aux layers set (goal: ratio 1.00 +- 0.02) and with
the default EAGLE-3 aux layers set.

    python tests/vllm/bench_forward.py [RELEASE] [--runs 5] [--generates 4]

Each measurement is one fresh process per variant (the same layout for both:
the tier's venv, the release's target on PYTHONPATH, one thread), alternating
unpatched / patched RUNS times.  Inside a process the model's own forward is
timed during real `LLM.generate` calls (real attention metadata, the engine's
own inputs): per generate call the median per-call time, and per process the
best of those (after two warm-up generates).  The ratio reported is the
median over runs of patched / unpatched.  The figures are only as quiet as
the machine: run it with nothing else busy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


# --------------------------------------------------------------------- worker side


def worker(args) -> int:
    """Runs inside the venv with one release on PYTHONPATH (and the inner
    suite's folder: runtime_env's); prints JSON."""
    import torch
    from helpers import FIXTURES, engine_kwargs, greedy
    from tier_plugins import cpu_workarounds
    from vllm import LLM

    cpu_workarounds.install()  # the CPU paths of the tier's runs, on every release
    torch.set_num_threads(1)
    llm = LLM(model=str(FIXTURES / "deepseek_v3"), **engine_kwargs(max_num_seqs=8))
    model = llm.apply_model(lambda m: m)[0]
    prompts = [" ".join(f"w{(7 * i + j) % 240}" for j in range(16)) for i in range(8)]
    sp = greedy(args.tokens)

    def measure(aux: tuple[int, ...] | None) -> dict:
        if aux is not None:
            model.set_aux_hidden_state_layers(aux)
        times: list[float] = []
        orig = model.forward
        kinds: set[str] = set()

        def timed(*a, **k):
            t0 = time.perf_counter()
            out = orig(*a, **k)
            times.append(time.perf_counter() - t0)
            kinds.add(type(out).__name__)
            return out[0] if isinstance(out, tuple) else out

        model.forward = timed
        per_generate: list[float] = []
        try:
            for _ in range(2):  # warm-up
                llm.generate(prompts, sp, use_tqdm=False)
            for _ in range(args.generates):
                times.clear()
                llm.generate(prompts, sp, use_tqdm=False)
                per_generate.append(statistics.median(times))
        finally:
            del model.forward
            if aux is not None:
                model.set_aux_hidden_state_layers(())
        # best-of the per-generate medians: robust to transient load
        return {
            "best_ms": min(per_generate) * 1e3,
            "median_ms": statistics.median(per_generate) * 1e3,
            "calls": len(times) * len(per_generate),
            "returns": sorted(kinds),
        }

    result = {"no_aux": measure(None)}
    if hasattr(model, "set_aux_hidden_state_layers"):
        result["default_aux"] = measure(tuple(model.get_eagle3_aux_hidden_state_layers()))
    print("BENCH " + json.dumps(result), flush=True)
    return 0


# --------------------------------------------------------------------- driver side


def one(release: str, variant: str, fixtures: Path, args) -> dict:
    from vllm_tier import targets, venvs
    from vllm_tier.runenv import runtime_env

    target = targets.target(release, variant == "patched")
    renv = runtime_env(target, fixtures, release, threads=1)
    cmd = [
        str(venvs.ensure(release)),
        str(Path(__file__).resolve()),
        "--worker",
        "--generates",
        str(args.generates),
        "--tokens",
        str(args.tokens),
    ]
    proc = subprocess.run(cmd, env=renv, capture_output=True, text=True, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[6:])
    sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
    raise SystemExit(f"{release} {variant}: the worker produced no figures (rc {proc.returncode})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("release", nargs="?", default=os.environ.get("VLLM") or None)
    ap.add_argument("--runs", type=int, default=6, help="alternating process pairs")
    ap.add_argument("--generates", type=int, default=8, help="timed generate calls per run")
    ap.add_argument("--tokens", type=int, default=32, help="tokens per prompt per generate")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)

    from vllm_tier import models, releases

    release = args.release or releases.default()[-1]
    fixtures = models.ensure(release)
    print(
        f"bench-forward: vLLM {release}, tiny DeepSeek-V3 ({fixtures.name}), CPU, 1 thread, "
        f"{args.runs} alternating runs x {args.generates} generates x {args.tokens} tokens",
        flush=True,
    )
    rows = []
    for i in range(args.runs):
        # alternate which variant goes first, so slow drift cancels out
        if i % 2 == 0:
            u = one(release, "unpatched", fixtures, args)
            p = one(release, "patched", fixtures, args)
        else:
            p = one(release, "patched", fixtures, args)
            u = one(release, "unpatched", fixtures, args)
        row = {
            "unpatched_ms": u["no_aux"]["best_ms"],
            "patched_ms": p["no_aux"]["best_ms"],
            "aux_ms": p.get("default_aux", {}).get("best_ms"),
        }
        row["ratio"] = row["patched_ms"] / row["unpatched_ms"]
        rows.append(row)
        aux = f"{row['aux_ms']:.3f}" if row["aux_ms"] else "n/a"
        print(
            f"  run {i + 1}: forward/call unpatched {row['unpatched_ms']:.3f} ms, "
            f"patched {row['patched_ms']:.3f} ms (ratio {row['ratio']:.4f}), "
            f"patched+default aux {aux} ms  [{p['no_aux']['calls']} calls, "
            f"returns {p['no_aux']['returns']} / {p.get('default_aux', {}).get('returns')}]",
            flush=True,
        )
    ratio = statistics.median(r["ratio"] for r in rows)
    spread = (min(r["ratio"] for r in rows), max(r["ratio"] for r in rows))
    verdict = "within" if abs(ratio - 1.0) <= 0.02 else "OUTSIDE"
    print(
        f"no aux layers: patched/unpatched = {ratio:.4f} (median of {len(rows)}; "
        f"range {spread[0]:.4f}-{spread[1]:.4f}) -> {verdict} the 1.00 +- 0.02 goal"
    )
    aux_rows = [r for r in rows if r["aux_ms"]]
    if aux_rows:
        a = statistics.median(r["aux_ms"] / r["unpatched_ms"] for r in aux_rows)
        b = statistics.median(r["aux_ms"] / r["patched_ms"] for r in aux_rows)
        print(
            f"default aux layers: patched+aux/unpatched = {a:.4f}, "
            f"patched+aux/patched no-aux = {b:.4f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
