"""DeepSeek-V3.2's EAGLE-3 aux hidden states at tensor parallel 2 (patch
deepseek-v32-capture-eagle-3-aux-states-after-the-all-reduce, marker
v32_tp_aux): the release's own ``DeepseekV32Model.forward`` of each platform
module (``nvidia/``, what CUDA serves; ``amd/``, ROCm's), run by the two
ranks of TP 2 over gloo, this process and one of its own, and at TP 1
(tier_builders/deepseek_v32_ranks.py: what runs, and the attention's
stand-in). Aux id k is the input of decoder layer k, which its input norm
sums (forward pre-hooks copy it): each rank's aux state must be exactly
that, and equal TP 1's within the rounding of the all-reduce. Unpatched,
every id >= 1 is the rank's partial sum (it differs between the ranks and
from TP 1), id num_hidden_layers is not returned, and ``amd/`` of the
releases before upstream's own layer-0 change adds the missing residual at
id 0 (unpatched.py: where each failure is seen).

A vLLM process besides this one, and this one's parallel groups: a check of
its own runs this file (VPATCH_VLLM_RANKS, release/conftest.py), not the
main run.
"""

from __future__ import annotations

import builtins
import os
import subprocess
import sys

import pytest
import unpatched
from tier_builders.deepseek_v32_ranks import NUM_LAYERS, RUNS

pytestmark = pytest.mark.v32_tp_aux

# TP 2 against TP 1: the dense MLP's down projection sums its halves in
# another order (float32)
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> dict:
    """{"tp1": [rank 0's results], "tp2": [rank 0's, rank 1's]}: rank 1 of
    TP 2 a process of its own, rank 0 this one (a file run apart: nothing
    else of vLLM runs here), which then runs TP 1."""
    import torch
    from tier_builders import deepseek_v32_ranks

    work = tmp_path_factory.mktemp("v32-ranks")
    cmd = [sys.executable, "-m", "tier_builders.deepseek_v32_ranks"]
    cmd += ["--rank", "1", "--work", str(work)]
    with (work / "rank1.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        rank0 = deepseek_v32_ranks.run_rank(2, 0, work / "tp2")
        tp1 = deepseek_v32_ranks.run_rank(1, 0, work / "tp1")
    except BaseException:
        proc.kill()  # it waits for rank 0 at every collective
        raise
    code = proc.wait(timeout=900)
    log = (work / "rank1.log").read_text()
    assert code == 0, f"TP 2 rank 1 failed ({code}):\n{log[-4000:]}"
    rank1 = torch.load(work / "rank1.pt")["tp2"]
    return {"tp1": [tp1], "tp2": [rank0, rank1]}


def result(got: dict, platform: str, run: str, mode: str) -> dict:
    """A rank's run; the exception its forward raised, raised again here."""
    r = got[platform, run, mode]
    if "error" in r:
        name, message = r["error"]
        raise getattr(builtins, name, RuntimeError)(f"in a TP rank's forward: {message}")
    return r


def diff(a, b) -> float:
    return (a - b).abs().max().item()


@pytest.mark.kernels
@pytest.mark.parametrize(
    "platform",
    [
        pytest.param("nvidia", marks=pytest.mark.patch_effect(unpatched.V32_PARTIAL_SUMS)),
        pytest.param("amd", marks=pytest.mark.patch_effect(unpatched.V32_AMD_LAYER_INPUTS)),
    ],
)
def test_tp2_aux_states_are_the_reduced_layer_inputs(ranks, platform, kernels):
    """Ids 0, 1 and 2 at TP 2: on each rank exactly what the layers' input
    norms summed (the embedding at id 0, still after the whole pass: an
    alias of it is overwritten in [cuda]), and TP 1's layer inputs."""
    import torch

    ids = RUNS["layers"]
    tp1 = result(ranks["tp1"][0], platform, "layers", kernels)
    tp2 = [result(r, platform, "layers", kernels) for r in ranks["tp2"]]
    assert [len(r["aux"]) for r in tp2] == [len(ids)] * 2, f"asked for ids {ids}"
    bad = []
    for i, k in enumerate(ids):
        got = [r["aux"][i] for r in tp2]
        off = [diff(g, r["inputs"][k]) for g, r in zip(got, tp2, strict=True)]
        close = [torch.allclose(g, tp1["inputs"][k], **TOLERANCE) for g in got]
        if any(off) or not all(close):
            from_tp1 = [diff(g, tp1["inputs"][k]) for g in got]
            bad.append(
                f"id {k} off the layer's input by {off[0]:.3g} on rank 0, {off[1]:.3g} on "
                f"rank 1, off TP 1's by {from_tp1[0]:.3g}, {from_tp1[1]:.3g}, rank 0 off "
                f"rank 1 by {diff(got[0], got[1]):.3g}"
            )
    assert not bad, "aux states at TP 2 are not the inputs of their layers: " + "; ".join(bad)


@pytest.mark.patch_effect(unpatched.V32_FINAL_ID_DROPPED)
@pytest.mark.parametrize("platform", ["nvidia", "amd"])
def test_tp2_aux_id_num_hidden_layers_is_the_final_norm_input(ranks, platform, kernels):
    """Ids (2, num_hidden_layers) at TP 2: both returned, the second on each
    rank exactly what the final norm summed, and TP 1's."""
    import torch

    ids = RUNS["final"]
    tp1 = result(ranks["tp1"][0], platform, "final", kernels)
    for rank, got in enumerate(ranks["tp2"]):
        r = result(got, platform, "final", kernels)
        assert len(r["aux"]) == len(ids), (
            f"asked for ids {ids}, got {len(r['aux'])} aux state(s) on rank {rank}"
        )
        torch.testing.assert_close(r["aux"][1], r["inputs"][NUM_LAYERS], rtol=0, atol=0)
        torch.testing.assert_close(r["aux"][1], tp1["inputs"][NUM_LAYERS], **TOLERANCE)


@pytest.mark.kernels
@pytest.mark.parametrize("platform", ["nvidia", "amd"])
def test_tp2_layer_inputs_are_tp1s(ranks, platform, kernels):
    """The premise, on both installs: what the norms sum at TP 2 is on each
    rank TP 1's (the stand-in and the weights make the two the same model)."""
    import torch

    tp1 = result(ranks["tp1"][0], platform, "final", kernels)
    tp2 = [result(r, platform, "final", kernels) for r in ranks["tp2"]]
    assert len(tp1["inputs"]) == NUM_LAYERS + 1
    for r in tp2:
        assert len(r["inputs"]) == NUM_LAYERS + 1
        for k in range(NUM_LAYERS + 1):
            torch.testing.assert_close(r["inputs"][k], tp1["inputs"][k], **TOLERANCE)
