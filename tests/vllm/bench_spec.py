"""Benchmark (not a test): EAGLE-3 acceptance and speed, served by the patched
vLLM on CPU, with a drafter trained offline against the tiny target.

    python tests/vllm/bench_spec.py [RELEASE ...]      # default 0.17.1 0.26.0 0.32.0

The drafter is trained once (tests/vllm/bench_spec_train.py in a tier venv:
a few minutes on 2 cores) against fixtures' ``deepseek_v3_bench`` and cached
under ``$VPATCH_CACHE/vllm-tier/bench-drafter/<key>``. For each release and
mode (eager, compiled) one process serves the target with the drafter and one
without (one engine per process, the release's patched install, one thread),
each timing greedy generates after a warm-up. Printed: vLLM's acceptance rate
(accepted / proposed draft tokens) and mean acceptance length (1 + accepted /
drafts), and the tokens/s of speculative vs plain generation (their ratio is
the figure; the absolute ones are only as quiet as the machine).

Where the tier serves on vLLM's V2 model runner (the runner GPUs serve these
targets with; release/tier_plugins/cpu_v2_runner.py), the same drafter and prompts are
served on it too, and its acceptance printed beside the V1 runner's
(upstream vllm-project/vllm#40551 reports lower EAGLE-3 acceptance on V2).

Then, eager, the same drafter served as a user's mistake serves it
(``MISTAKES``: what doctor says users lose without an error), each printed
beside the correct run: the aux ids one layer off, and the ids written in
another order than the drafter was trained in; and, for scale, with no
states at all (fc zeroed), the floor its own token input gives.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RELEASES = ("0.17.1", "0.26.0", "0.32.0")
MODES = ("eager", "compiled")
SPEC_TOKENS = 3
IDS = "eagle_aux_hidden_state_layer_ids"


def _ids(cfg: dict, ids: list[int]) -> dict:
    """The drafter's config with ``ids`` where it names its aux layers (top
    level and eagle_config, as SpecForge writes them)."""
    cfg = {**cfg, IDS: ids}
    if IDS in cfg.get("eagle_config", {}):
        cfg["eagle_config"] = {**cfg["eagle_config"], IDS: ids}
    return cfg


def _one_layer_off(cfg: dict, weights: dict) -> tuple[dict, dict]:
    """The SGLang/vLLM convention mix-up (doctor's trained_layers): every id
    one layer off, so vLLM feeds each state one layer away from the one the
    drafter was trained on."""
    return _ids(cfg, [i + 1 for i in cfg[IDS]]), weights


def _another_order(cfg: dict, weights: dict) -> tuple[dict, dict]:
    """A drafter trained with its states concatenated in the order its ids are
    written, the ids written descending (doctor's aux_layers ordering
    warning): vLLM concatenates them in layer order, so fc sees them
    permuted."""
    import torch  # worker side: the tier venv's

    ids = cfg[IDS]
    width = weights["fc.weight"].shape[1] // len(ids)
    blocks = weights["fc.weight"].split(width, dim=1)
    fc = torch.cat(blocks[::-1], dim=1)  # trained in the written order
    return _ids(cfg, ids[::-1]), {**weights, "fc.weight": fc.contiguous()}


def _no_states(cfg: dict, weights: dict) -> tuple[dict, dict]:
    """Not a mistake: the drafter with fc zeroed, so it gets nothing of the
    target's states, only its own token input. The floor against which a
    mistake's loss reads: what the states give is the correct run's
    acceptance above it."""
    return cfg, {**weights, "fc.weight": weights["fc.weight"] * 0}


# name: (what the drafter is served with, the drafter made of the trained one)
MISTAKES = {
    "one-layer-off": ("aux ids one layer off", _one_layer_off),
    "another-order": ("aux ids in another order than trained", _another_order),
    "no-states": ("(floor) no aux states at all", _no_states),
}


def _mistaken(drafter: str, name: str, out: Path) -> str:
    """The trained drafter as the mistake ``name`` serves it, in ``out``."""
    import shutil

    from safetensors.torch import load_file, save_file

    src = Path(drafter)
    shutil.copytree(src, out, dirs_exist_ok=True)
    cfg = json.loads((src / "config.json").read_text())
    cfg, weights = MISTAKES[name][1](cfg, load_file(str(src / "model.safetensors")))
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    return str(out)


# --------------------------------------------------------------------- worker side


def worker(args) -> int:
    """Runs inside the venv with one release on PYTHONPATH (and the inner
    suite's folder: runtime_env's); prints JSON."""
    import torch
    from helpers import FIXTURES, engine_kwargs, greedy
    from tier_plugins import cpu_workarounds

    cpu_workarounds.install()
    torch.set_num_threads(1)
    from vllm import LLM

    kw = engine_kwargs(
        enforce_eager=args.mode == "eager", max_num_seqs=8, enable_prefix_caching=False
    )
    if args.drafter:
        import tempfile

        drafter = args.drafter
        if args.mistake:
            drafter = _mistaken(drafter, args.mistake, Path(tempfile.mkdtemp()) / "drafter")
        kw.update(
            speculative_config={
                "method": "eagle3",
                "model": drafter,
                "num_speculative_tokens": SPEC_TOKENS,
            },
            disable_log_stats=False,
        )
    t0 = time.perf_counter()
    llm = LLM(model=str(FIXTURES / "deepseek_v3_bench"), **kw)
    start = time.perf_counter() - t0
    # prompts the drafter never saw (its data came from other seeded prompts)
    prompts = [" ".join(f"w{(37 * i + 11 * j + 5) % 240}" for j in range(8)) for i in range(8)]
    sp = greedy(args.tokens)
    llm.generate(prompts, sp, use_tqdm=False)  # warm-up

    def counters() -> dict[str, float]:
        out: dict[str, float] = {}
        if args.drafter:
            for m in llm.get_metrics():
                if m.name.startswith("vllm:spec_decode") and hasattr(m, "value"):
                    out[m.name] = out.get(m.name, 0.0) + float(m.value or 0)
        return out

    before = counters()
    times, tokens = [], []
    for _ in range(args.generates):
        t1 = time.perf_counter()
        outs = llm.generate(prompts, sp, use_tqdm=False)
        times.append(time.perf_counter() - t1)
        tokens.append([list(o.outputs[0].token_ids) for o in outs])
    after = counters()
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    result = {
        "engine_start_s": start,
        "tokens_per_s": sum(len(t) for t in tokens[0]) / min(times),
        "tokens": tokens[0],
        "drafts": delta.get("vllm:spec_decode_num_drafts", 0.0),
        "draft_tokens": delta.get("vllm:spec_decode_num_draft_tokens", 0.0),
        "accepted": delta.get("vllm:spec_decode_num_accepted_tokens", 0.0),
    }
    print("BENCH " + json.dumps(result), flush=True)
    return 0


# --------------------------------------------------------------------- driver side


def drafter(release: str) -> Path:
    """The trained drafter (built once per training script, reference and
    fixtures)."""
    from vllm_tier import cache, models, venvs
    from vllm_tier.log import run

    fixtures = models.ensure(release)
    files = [
        HERE / "bench_spec_train.py",
        HERE / "release" / "tier_builders" / "eagle3_reference.py",
    ]
    key = hashlib.sha256(
        b"".join(f.read_bytes() for f in files) + fixtures.name.encode()
    ).hexdigest()[:12]
    py = venvs.ensure(release)
    return cache.built(
        cache.root() / "bench-drafter" / key,
        key,
        lambda out: run(
            [py, files[0], "--fixtures", fixtures, "--out", out],
            env={
                **os.environ,
                "PYTHONPYCACHEPREFIX": str(cache.root() / "pycache"),
                "HF_HUB_OFFLINE": "1",
                "OMP_NUM_THREADS": "1",  # spin-waiting threads crawl on a shared machine
                "PYTHONPATH": str(HERE / "release"),  # eagle3_reference
            },
        ),
        "the benchmark's trained EAGLE-3 drafter",
    )


def one(
    release: str,
    mode: str,
    drafter_dir: Path | None,
    args,
    mistake: str | None = None,
    v2: bool = False,
) -> dict:
    from vllm_tier import models, targets, venvs
    from vllm_tier.checks.served import V2_ENV
    from vllm_tier.runenv import runtime_env

    target = targets.patched(release)
    fixtures = models.ensure(release)
    renv = runtime_env(target, fixtures, release, threads=1, compiled=mode == "compiled")
    if v2:  # the V2 model runner, as the tier's V2 runs serve it
        renv.update(V2_ENV)
    cmd = [str(venvs.ensure(release)), str(Path(__file__).resolve()), "--worker"]
    cmd += ["--mode", mode, "--generates", str(args.generates), "--tokens", str(args.tokens)]
    if drafter_dir is not None:
        cmd += ["--drafter", str(drafter_dir)]
    if mistake:
        cmd += ["--mistake", mistake]
    proc = subprocess.run(cmd, env=renv, capture_output=True, text=True, timeout=1800)
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[6:])
    sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
    raise SystemExit(f"{release} {mode}: the worker produced no figures (rc {proc.returncode})")


def _acceptance(spec: dict) -> tuple[float, float]:
    """(acceptance rate, mean acceptance length) of a speculative run."""
    rate = spec["accepted"] / spec["draft_tokens"] if spec["draft_tokens"] else 0.0
    length = 1 + spec["accepted"] / spec["drafts"] if spec["drafts"] else 0.0
    return rate, length


def _lossless(spec: dict, plain: dict) -> str:
    return "yes" if spec["tokens"] == plain["tokens"] else "NO"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("releases", nargs="*")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--generates", type=int, default=3, help="timed generate calls per process")
    ap.add_argument("--tokens", type=int, default=48, help="tokens per prompt per generate")
    ap.add_argument(
        "--trained", type=Path, help="a drafter bench_spec_train.py made (skips the training)"
    )
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--drafter", help=argparse.SUPPRESS)
    ap.add_argument("--mistake", choices=sorted(MISTAKES), help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)

    wanted = args.releases or (os.environ.get("VLLM") or " ".join(RELEASES)).split()
    t0 = time.monotonic()
    # trained in one venv whatever the releases asked for (the data come from
    # transformers' DeepSeek-V3: experts_implementation is transformers 5's)
    d = args.trained or drafter(RELEASES[-1])
    print(
        f"bench-spec: drafter {d} ({time.monotonic() - t0:.0f}s); 8 prompts x "
        f"{args.tokens} tokens, best of {args.generates} generates, 1 thread",
        flush=True,
    )
    from vllm_tier import releases

    for release in wanted:
        why = releases.no_eagle3_on_cpu(release)
        if why:
            print(f"vLLM {release}: skipped, vLLM's CPU runner cannot serve EAGLE-3 ({why})")
            continue
        for mode in args.modes.split(","):
            plain = one(release, mode, None, args)
            spec = one(release, mode, d, args)
            rate, length = _acceptance(spec)
            speedup = spec["tokens_per_s"] / plain["tokens_per_s"]
            print(
                f"vLLM {release} {mode:8}: acceptance {rate:.3f}, mean acceptance length "
                f"{length:.2f} ({spec['accepted']:.0f}/{spec['draft_tokens']:.0f} draft tokens); "
                f"tokens/s speculative {spec['tokens_per_s']:.1f} vs plain "
                f"{plain['tokens_per_s']:.1f} (x{speedup:.2f}); "
                f"lossless: {_lossless(spec, plain)}; engine start {spec['engine_start_s']:.0f}s "
                f"/ {plain['engine_start_s']:.0f}s",
                flush=True,
            )
            if releases.serves_v2(release):
                on_v2 = one(release, mode, d, args, v2=True)
                rate2, length2 = _acceptance(on_v2)
                print(
                    f"vLLM {release} {mode:8}  V2 model runner: acceptance {rate2:.3f} "
                    f"(V1 {rate:.3f}), mean acceptance length {length2:.2f} (V1 {length:.2f}) "
                    f"({on_v2['accepted']:.0f}/{on_v2['draft_tokens']:.0f} draft tokens); "
                    f"tokens/s {on_v2['tokens_per_s']:.1f} (V1 {spec['tokens_per_s']:.1f}); "
                    f"lossless: {_lossless(on_v2, plain)}; same tokens as V1: "
                    f"{'yes' if on_v2['tokens'] == spec['tokens'] else 'NO'}",
                    flush=True,
                )
            if mode != "eager":  # the mistakes: acceptance does not depend on the mode
                continue
            for name, (what, _) in MISTAKES.items():
                wrong = one(release, mode, d, args, mistake=name)
                wrate, wlength = _acceptance(wrong)
                print(
                    f"vLLM {release} {mode:8}  {what}: acceptance {wrate:.3f} (correct "
                    f"{rate:.3f}), mean acceptance length {wlength:.2f} (correct {length:.2f}); "
                    f"lossless: {_lossless(wrong, plain)}",
                    flush=True,
                )
    print(f"bench-spec: {(time.monotonic() - t0) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
