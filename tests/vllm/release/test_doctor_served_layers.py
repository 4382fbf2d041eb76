"""The layers `vpatch doctor` says vLLM will feed the drafter are the layers
the served engine asks the target for: for each id convention and
nested/top-level variant, a real `vllm.LLM` with the EAGLE-3
speculative_config is started on the tiny DeepSeek-V3 target, and the aux
layer ids are read from the running engine's model (DeepseekV2Model
.aux_hidden_state_layers, set by the model runner), not recomputed. doctor is
asked with the model runner the engine runs (VLLM_USE_V2_MODEL_RUNNER set to
match it in the serve command, as a user would write it): the V1 runner, or
in a V2 run (cpu_v2_runner) the V2 runner, whose ids differ (it reads
``eagle_config.layer_ids``, not ``eagle_config``'s
``eagle_aux_hidden_state_layer_ids``).

Runs only in a process of its own (VPATCH_VLLM_SERVED; the tier's outer
test_doctor_names_the_served_layers starts it on the patched install): each
engine torn down takes vLLM's parallel groups with it. The tier starts it
only where vLLM's CPU runner serves EAGLE-3 by itself (not on the releases
of stand_ins.py, served through cpu_spec_decode's stand-ins, nor on those of
vllm_tier.releases.NO_EAGLE3_ON_CPU, which say why).
The drafters here have head_dim 32 (the CPU attention kernels' smallest), and
draft vocab = vocab with no d2t (0.30.0+ refuse d2t then).
(Acceptance on the tiny model hardly reacts to mis-fed layers, so it is not
what is compared.)
"""

from __future__ import annotations

import gc
import json
import math
import re
from pathlib import Path

import cpu_v2_runner
import pytest
from doctor_pairs import save, verdict_serve
from helpers import FIXTURES, engine_kwargs, in_process

TARGET = FIXTURES / "deepseek_v3"
IDS = "eagle_aux_hidden_state_layer_ids"
HEADS, HEAD_DIM = 2, 32

# name: (config keys set on the drafter, the layers vLLM's convention says it
# was trained on)
VARIANTS = {
    "default": ({}, (2, 4, 5)),
    "top_vllm": ({IDS: [3, 4, 6]}, (3, 4, 6)),
    "nested_vllm": ({"eagle_config": {IDS: [3, 4, 6]}}, (3, 4, 6)),
    "nested_output": ({"eagle_config": {IDS: [1, 3, 4]}}, (2, 4, 5)),
    "top_output": ({IDS: [1, 3, 4], "eagle_config": {IDS: [1, 3, 4]}}, (2, 4, 5)),
    "top_converted": ({IDS: [2, 4, 5], "eagle_config": {IDS: [1, 3, 4]}}, (2, 4, 5)),
}


def make_drafter(out: Path, config: dict) -> Path:
    """The tiny EAGLE-3 drafter with 2 heads of 32 (its draft vocabulary and
    d2t as the fixture has them: every tier release serves that shape)."""
    import torch
    from safetensors.torch import load_file

    base = FIXTURES / "eagle3"
    cfg = json.loads((base / "config.json").read_text())
    t = load_file(str(base / "model.safetensors"))
    hidden = cfg["hidden_size"]
    gen = torch.Generator().manual_seed(11)

    def w(o, i):
        return torch.randn(o, i, generator=gen) / math.sqrt(i)

    q = HEADS * HEAD_DIM
    m = "midlayer.self_attn."
    t[m + "q_proj.weight"] = w(q, 2 * hidden)
    t[m + "k_proj.weight"] = w(q, 2 * hidden)
    t[m + "v_proj.weight"] = w(q, 2 * hidden)
    t[m + "o_proj.weight"] = w(hidden, q)
    cfg.update(num_attention_heads=HEADS, num_key_value_heads=HEADS, head_dim=HEAD_DIM)
    cfg.update(config)
    return save(out, cfg, t)


def _engine_facts(worker) -> dict:
    """Run in the engine's worker: the runner and the target's aux layers."""
    runner = worker.model_runner
    model = runner.model
    inner = getattr(model, "model", model)
    layers = getattr(inner, "aux_hidden_state_layers", None)
    return {
        "runner": f"{type(runner).__module__}.{type(runner).__qualname__}",
        # the V2 runner is vllm/v1/worker/gpu/model_runner.py's, or a subclass
        # (vLLM's CPU one is vllm/v1/worker/cpu/model_runner.py)
        "v2": any(c.__module__ == "vllm.v1.worker.gpu.model_runner" for c in type(runner).__mro__),
        "layers": list(layers) if layers is not None else None,
    }


def served(drafter: Path) -> dict:
    in_process()  # collective_rpc runs _engine_facts in this process's worker
    from vllm import LLM

    spec = {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 2}
    llm = LLM(model=str(TARGET), speculative_config=spec, **engine_kwargs())
    try:
        facts = llm.collective_rpc(_engine_facts)[0]
        out = llm.generate(["w1 w2 w3"], _greedy(4))  # the engine serves the pair
        facts["generated"] = len(out[0].outputs[0].token_ids)
        return facts
    finally:
        del llm
        gc.collect()


def _greedy(n: int):
    from vllm import SamplingParams

    return SamplingParams(temperature=0.0, max_tokens=n)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_doctor_names_the_layers_the_served_engine_asks_for(name, tmp_path):
    config, trained = VARIANTS[name]
    drafter = make_drafter(tmp_path / name, config)
    facts = served(drafter)
    assert facts["generated"] == 4
    assert facts["layers"] is not None, facts
    fed = tuple(sorted(facts["layers"]))
    v2 = facts["v2"]
    assert v2 == cpu_v2_runner.wanted(), facts  # the runner the run asked for
    spec = json.dumps({"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 2})
    report = verdict_serve(
        f"VLLM_USE_V2_MODEL_RUNNER={1 if v2 else 0}",
        "vllm",
        "serve",
        str(TARGET),
        "--max-model-len",
        "256",
        "--speculative-config",
        spec,
    )
    aux = next(f.message for f in report.findings if f.check == "aux_layers")
    said = re.search(r"feeds the drafter layers \[([\d, ]*)\]", aux)
    assert said, aux
    assert tuple(sorted(int(x) for x in said.group(1).split(", "))) == fed, (facts, aux)
    trained_ok = next(f.severity for f in report.findings if f.check == "trained_layers")
    assert (trained_ok == "error") == (fed != trained), (name, facts, report.to_text())
