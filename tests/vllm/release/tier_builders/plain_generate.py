"""The served target without a drafter, eager, TP 1, in a process of its own
(one engine per process): the reference the served speculative tests compare
with, eager and compiled alike. Runs in a tier run's environment (release/ on
PYTHONPATH), with Dynamo off (TORCHDYNAMO_DISABLE=1, as every eager tier
run)::

    python -m tier_builders.plain_generate --target DIR --out tokens.json [--aux 0,4,7] [--sampled]

writes to ``tokens.json`` each served prompt's token ids and greedy tokens
(SERVED_REFERENCE_TOKENS of them: the acceptance predictions need the tokens
past max_tokens), and with ``--sampled`` the sampled requests' tokens; with
``--aux``, to ``tokens.pt`` the target's aux states of those layers at every
position of each prompt and its greedy tokens (the inputs of the decoder
layers, hooked as the served test's recorder hooks them). Each prompt is
generated alone, so that every forward of its generate is its own: the
prefill's rows, then one row a step.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


class _AuxStates:
    """The inputs of the decoder layers ``ids`` of every forward, in order."""

    def __init__(self, decoder, ids: list[int]) -> None:
        from helpers import layer_input

        self.rows: dict[int, list] = {i: [] for i in ids}
        self.handles = []
        for i in ids:

            def hook(module, args, kwargs, i=i):
                self.rows[i].append(layer_input(module, args, kwargs))

            self.handles.append(decoder.layers[i].register_forward_pre_hook(hook, with_kwargs=True))

    def take(self):
        import torch

        out = torch.cat([torch.cat(self.rows[i]) for i in self.rows], dim=-1)
        for rows in self.rows.values():
            rows.clear()
        return out

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def in_child(
    target: str, out: Path, aux: list[int], sampled: bool = False, runner: str = "plain"
) -> dict:
    """This module run in a process of its own, in this run's environment:
    its output (``states``: the aux states it hooked, loaded). ``runner``
    "same": on the run's own runner, whatever cpu_v2_runner.plain_env would
    pick (DeepSeek-V4: the V1 runner cannot build its attention metadata on
    CPU without the V2 run's Triton)."""
    import os
    import subprocess

    import torch
    from tier_plugins import cpu_v2_runner

    cmd = [sys.executable, "-m", "tier_builders.plain_generate", "--target", target]
    cmd += ["--out", str(out), "--aux", ",".join(map(str, aux))]
    cmd += ["--sampled"] if sampled else []
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=1500,
        # eager all through, in a compiled run too (see runenv.runtime_env);
        # on the V1 runner in a V2 run too where the release has one: the
        # target's tokens are the runner's to keep, not to make, and V1 runs
        # no kernel by the interpreter there (the V2 runner runs all of its)
        env={
            **(dict(os.environ) if runner == "same" else cpu_v2_runner.plain_env(dict(os.environ))),
            "TORCHDYNAMO_DISABLE": "1",
        },
    )
    assert proc.returncode == 0, (
        f"the plain engine failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    got = json.loads(out.read_text())
    got["states"] = torch.load(out.with_suffix(".pt"))
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--aux", help="the aux layer ids to hook, comma-separated")
    ap.add_argument("--sampled", action="store_true", help="the sampled requests too")
    args = ap.parse_args(argv)

    from helpers import (
        SAMPLED_PROMPT,
        SAMPLED_REQUESTS,
        SERVED_REFERENCE_TOKENS,
        greedy,
        sampled,
        served_kwargs,
        served_prompts,
        served_target,
    )
    from tier_plugins import cpu_workarounds

    cpu_workarounds.install()  # the same CPU paths as the served engine's process
    from vllm import LLM

    # at TP 1 whatever the served engine's: the reference of every run
    llm = LLM(model=args.target, **served_kwargs(compiled=False, target=served_target()))
    aux = None
    if args.aux:
        model = llm.collective_rpc(lambda worker: worker.model_runner)[0].get_model()
        lm = getattr(model, "language_model", model)
        aux = _AuxStates(getattr(lm, "model", lm), [int(i) for i in args.aux.split(",")])
    ids, tokens, states = [], [], []
    for prompt in served_prompts(served_target()):
        [out] = llm.generate([prompt], greedy(SERVED_REFERENCE_TOKENS), use_tqdm=False)
        ids.append(list(out.prompt_token_ids))
        tokens.append(list(out.outputs[0].token_ids))
        if aux is not None:
            got = aux.take()
            # every position fed to the target: the prompt and each token but the last
            want = len(ids[-1]) + len(tokens[-1]) - 1
            if got.shape[0] != want:
                raise SystemExit(f"hooked {got.shape[0]} rows of aux states, expected {want}")
            states.append(got)
    result: dict = {"prompt_token_ids": ids, "tokens": tokens}
    if aux is not None:
        aux.close()
        import torch

        torch.save(states, args.out.with_suffix(".pt"))
    if args.sampled:
        outs = llm.generate(
            [SAMPLED_PROMPT] * SAMPLED_REQUESTS,
            [sampled(seed) for seed in range(SAMPLED_REQUESTS)],
            use_tqdm=False,
        )
        result["sampled"] = [list(o.outputs[0].token_ids) for o in outs]
    args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
