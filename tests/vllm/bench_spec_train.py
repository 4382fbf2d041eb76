"""Train the benchmark's EAGLE-3 drafter offline against the tiny target
(runs in a tier venv; bench_spec.py builds it once and caches it)::

    <venv>/bin/python tests/vllm/bench_spec_train.py --fixtures DIR --out DRAFTER

The target is fixtures' ``deepseek_v3_bench`` (o_proj/down_proj scaled, so
that its next token is learnable). Data: the target's own greedy
continuations of seeded random prompts (transformers, float32), and its
layer inputs at the drafter's aux layers captured by forward pre-hooks on
its decoder layers (id k = input of layer k, 0 = the embedding). The
drafter (release/tier_builders/eagle3_reference.py's function, float32, autograd) learns
token t+2 from the states at t and the embedding of token t+1, teacher
forced, and its later draft steps as vLLM runs them (EAGLE-3's test-time
training): step k's row at t takes step k-1's pre-norm output at t and the
embedding of token t+k, one position on, and attends the target's rows up
to t and its own rows of the earlier steps at t. Its draft vocab is the
target's most frequent tokens in the data (as SpecForge picks it), d2t
mapping them back. Seeded throughout.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import torch
from tier_builders.eagle3_reference import (
    Eagle3Reference,  # the inner suite's: on PYTHONPATH (bench_spec.py)
)

PROMPTS, PROMPT_LEN, CONTINUATION = 8192, 8, 40
STEPS, BATCH, LR = 1500, 32, 3e-3  # Adam, the rate on a cosine to 0
DRAFT_STEPS = 3  # the speculative tokens bench_spec.py serves


def target_data(target: Path, ids: list[int]):
    """(sequences [N, T], aux states [N, T, 3*hidden]) of the target."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        str(target), torch_dtype=torch.float32, experts_implementation="eager"
    ).eval()
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(4, vocab - 2, (PROMPTS, PROMPT_LEN), generator=gen)
    with torch.no_grad():
        seqs = model.generate(
            prompts,
            attention_mask=torch.ones_like(prompts),
            max_new_tokens=CONTINUATION,
            min_new_tokens=CONTINUATION,
            do_sample=False,
            pad_token_id=3,
        )
    captured: dict[int, torch.Tensor] = {}

    def hook(index):
        def pre(module, args, kwargs):
            hs = kwargs.get("hidden_states", args[0] if args else None)
            captured[index] = hs.detach().clone()

        return pre

    layers = model.model.layers
    handles = [layers[i].register_forward_pre_hook(hook(i), with_kwargs=True) for i in ids]
    with torch.no_grad():
        model(seqs)
    for h in handles:
        h.remove()
    return seqs, torch.cat([captured[i] for i in ids], dim=-1)


def draft_steps_mask(rows: int, steps: int) -> torch.Tensor:
    """Which rows a row attends when ``steps`` draft steps of ``rows``
    positions run as one sequence (block k = step k+1): block 0 is causal
    over the target's rows; a row of a later block attends the target's rows
    up to its position and the rows of the blocks up to its own at that
    position, as vLLM's proposer has them in its KV cache."""
    block = torch.arange(rows * steps) // rows
    pos = torch.arange(rows * steps) % rows
    target = (block[None, :] == 0) & (pos[None, :] <= pos[:, None])
    own = (
        (block[None, :] >= 1) & (block[None, :] <= block[:, None]) & (pos[None, :] == pos[:, None])
    )
    return target | own


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    torch.manual_seed(0)
    base, target = args.fixtures / "eagle3_layer0", args.fixtures / "deepseek_v3_bench"
    cfg = json.loads((base / "config.json").read_text())
    ids = cfg["eagle_aux_hidden_state_layer_ids"]
    seqs, aux = target_data(target, ids)
    print(
        f"data: {tuple(seqs.shape)} tokens, states {tuple(aux.shape)} "
        f"({time.monotonic() - t0:.0f}s)"
    )

    # the draft vocab: the most frequent target tokens the drafter must predict
    draft_vocab = cfg["draft_vocab_size"]
    counts = torch.bincount(seqs[:, PROMPT_LEN:].flatten(), minlength=cfg["vocab_size"])
    chosen = counts.argsort(descending=True)[:draft_vocab].sort().values
    t2d = torch.zeros(cfg["vocab_size"], dtype=torch.bool)
    t2d[chosen] = True
    to_draft = torch.full((cfg["vocab_size"],), -100, dtype=torch.long)
    to_draft[chosen] = torch.arange(draft_vocab)
    covered = counts[chosen].sum().item() / max(1, counts.sum().item())
    print(f"draft vocab {draft_vocab}: {covered:.1%} of the continuation tokens")

    from safetensors.torch import load_file, save_file

    init = load_file(str(base / "model.safetensors"))
    trainable = {
        k: v.clone().float().requires_grad_(True)
        for k, v in init.items()
        if k not in ("d2t", "t2d")
    }
    drafter = Eagle3Reference(base, target, dtype=torch.float32, weights=dict(trainable))
    drafter.w = dict(trainable)  # the leaves themselves (the constructor converts)
    drafter.w["d2t"] = chosen - torch.arange(draft_vocab)
    opt = torch.optim.Adam(trainable.values(), lr=LR)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, STEPS)
    n, t = seqs.shape
    rows = t - 1  # positions 0..t-2: states at t, embedding of token t+1 -> token t+2
    positions = torch.arange(rows)
    masks = [draft_steps_mask(rows, k + 1) for k in range(DRAFT_STEPS)]
    gen = torch.Generator().manual_seed(1)
    for step in range(STEPS):
        batch = torch.randint(0, n, (BATCH,), generator=gen)
        tokens, states = seqs[batch], aux[batch]
        hidden, embeds, pos = (
            [drafter.fc(states[:, :rows])],
            [drafter.embed[tokens[:, 1:]]],
            [positions],
        )
        loss = torch.zeros(())
        for k in range(DRAFT_STEPS):
            normed, prenorm = drafter.layer(
                torch.cat(embeds, 1), torch.cat(hidden, 1), torch.cat(pos), masks[k]
            )
            # step k+1's row at t predicts token t+2+k
            valid = rows - 1 - k
            logits = normed[:, k * rows : k * rows + valid] @ drafter.w["lm_head.weight"].T
            labels = to_draft[tokens[:, 2 + k : 2 + k + valid]].clone()
            labels[:, : max(0, PROMPT_LEN - 2 - k)] = -100  # learn the target's continuations
            loss = loss + torch.nn.functional.cross_entropy(
                logits.flatten(0, 1), labels.flatten(), ignore_index=-100
            )
            if k + 1 < DRAFT_STEPS:
                # the next step's row at t: this step's pre-norm output at t,
                # the embedding of token t+2+k (teacher forced), one position on
                following = torch.zeros(BATCH, rows, dtype=torch.long)
                following[:, : t - 2 - k] = tokens[:, 2 + k :]
                hidden.append(prenorm[:, k * rows : (k + 1) * rows])
                embeds.append(drafter.embed[following])
                pos.append(positions + 1 + k)
        loss = loss / DRAFT_STEPS
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
        if step % 250 == 0 or step == STEPS - 1:
            print(f"step {step}: loss {loss.item():.3f} ({time.monotonic() - t0:.0f}s)", flush=True)

    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    for f in base.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, args.out / f.name)
    weights = {k: v.detach().contiguous() for k, v in trainable.items()}
    weights["d2t"] = chosen - torch.arange(draft_vocab)
    weights["t2d"] = t2d
    save_file(weights, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    print(f"drafter in {args.out} ({time.monotonic() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
