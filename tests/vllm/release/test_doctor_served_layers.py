"""The layers `vpatch doctor` says vLLM will feed the drafter are the layers
the served engine asks the target for: for each id convention and
nested/top-level variant, a real `vllm.LLM` with the EAGLE-3
speculative_config is started on the tiny DeepSeek-V3 target, and the aux
layer ids are read from the running engine's model (DeepseekV2Model
.aux_hidden_state_layers, set by the model runner), not recomputed. doctor is
asked with the model runner the engine runs (VLLM_USE_V2_MODEL_RUNNER in the
serve command as the run's environment sets it for the engine, as a user
writes it: 0 for the V1 runner, 1 in a V2 run, cpu_v2_runner), whose ids
differ (V2 reads ``eagle_config.layer_ids``, not ``eagle_config``'s
``eagle_aux_hidden_state_layer_ids``). On 0.34.0, which has no V1 runner,
1 is redundant (vLLM warns) and the engines start with it, as doctor says
(its model_runner finding); a drafter whose ids are only under
``eagle_config`` (``nested_*``) gets the target's default layers there.

Here too, with the same variable: whether vLLM lowers the served
max_model_len to a drafter's positions (0.33.0 on the V2 runner, 0.34.0
always: config/vllm.py ``_limit_max_model_len_to_draft``, for a drafter
whose RoPE type is not cache-only), as doctor's max_model_len finding says;
and in a V2 run, whether an engine at PP 2 stops at start with the V2
runner's refusal of EAGLE-3 with PP, as doctor's pipeline_parallel finding
says.

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
import os
import re
from pathlib import Path

import pytest
from helpers import FIXTURES, engine_args, engine_kwargs, in_process
from tier_builders.doctor_pairs import save, verdict_serve
from tier_plugins import cpu_v2_runner

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
        _runner_variable(),
        "vllm",
        "serve",
        str(TARGET),
        "--max-model-len",
        "256",
        "--speculative-config",
        spec,
    )
    # the engine started and served with the variable: doctor says it starts
    started = next(f for f in report.findings if f.check == "model_runner")
    assert started.severity != "error", started.message
    aux = next(f.message for f in report.findings if f.check == "aux_layers")
    said = re.search(r"feeds the drafter layers \[([\d, ]*)\]", aux)
    assert said, aux
    assert tuple(sorted(int(x) for x in said.group(1).split(", "))) == fed, (facts, aux)
    trained_ok = next(f.severity for f in report.findings if f.check == "trained_layers")
    assert (trained_ok == "error") == (fed != trained), (name, facts, report.to_text())


def _runner_variable() -> str:
    """VLLM_USE_V2_MODEL_RUNNER as the run's environment sets it for the
    engine (vllm_tier.checks: 0 or 1), as a user writes it before the
    command."""
    value = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
    assert value in ("0", "1"), f"VLLM_USE_V2_MODEL_RUNNER={value}: run through the tier"
    return f"VLLM_USE_V2_MODEL_RUNNER={value}"


# The drafter's positions under the target's (256 of 512, vLLM's default
# max_model_len for the tiny target), with YaRN rope (not cache-only: the
# public Kimi MLA drafters' kind) or the default rope (cache-only: vLLM
# sizes its cache for the target's positions).
DRAFT_POSITIONS, TARGET_POSITIONS = 256, 512
ROPES = {
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
    "default": None,
}
LOWERS = re.compile(r"lowers the served max_model_len to (\d+)")


@pytest.mark.parametrize("rope", sorted(ROPES))
def test_doctor_says_when_vllm_lowers_max_model_len(rope, tmp_path, record_property):
    """With the drafter of fewer positions, and max_model_len left to vLLM
    (the target's 512): the engine config vLLM serves with (what /v1/models
    reports and the scheduler holds prompts to) has a lower max_model_len
    exactly when doctor says vLLM lowers it, to the drafter's positions,
    with the runner the run's variable picks."""
    extra: dict = {"max_position_embeddings": DRAFT_POSITIONS}
    if ROPES[rope] is not None:
        extra["rope_scaling"] = dict(ROPES[rope])
    drafter = make_drafter(tmp_path / rope, extra)
    spec = {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 2}
    kw = {"max_model_len": None, "max_num_batched_tokens": TARGET_POSITIONS}
    served = engine_args(str(TARGET), speculative_config=spec, **kw).create_engine_config()
    got = served.model_config.max_model_len
    report = verdict_serve(
        _runner_variable(), "vllm", "serve", str(TARGET), "--speculative-config", json.dumps(spec)
    )
    said = next(f.message for f in report.findings if f.check == "max_model_len")
    lowered = LOWERS.search(said)
    record_property("max_model_len", f"{_runner_variable()} {rope}: served {got}")
    assert (got < TARGET_POSITIONS) == bool(lowered), (rope, got, said)
    if lowered:
        assert int(lowered.group(1)) == got == DRAFT_POSITIONS, (got, said)


# The V2 runner's refusal of EAGLE-3 with PP, at model load in each rank
# (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py
# verify_supports_aux_hidden_states_over_pp), and doctor's word for it.
PP_REFUSED = re.compile(r"(\w+) does not support eagle3 with pipeline parallelism")
SAYS_REFUSED = "refuses EAGLE-3 with pipeline parallelism for "

# a PP 2 engine's ranks are processes vLLM spawns (a core each): V2 runs
# only, where doctor's verdict on PP is the V2 runner's; last in the file,
# as its engine may stop half made
if cpu_v2_runner.wanted():

    def test_doctor_says_whether_the_v2_runner_refuses_pipeline_parallelism(
        tmp_path, capfd, monkeypatch
    ):
        """`--pipeline-parallel-size 2` with the drafter: doctor says the V2
        runner refuses EAGLE-3 with PP for the target exactly when an engine
        at PP 2 stops at start with the runner's refusal in its ranks (0.30.0
        on; what vLLM does otherwise is not this test's)."""
        from vllm import LLM

        drafter = make_drafter(tmp_path / "pp", {})
        spec = {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 2}
        report = verdict_serve(
            _runner_variable(), "vllm", "serve", str(TARGET), "--pipeline-parallel-size", "2",
            "--max-model-len", "256", "--speculative-config", json.dumps(spec),
        )  # fmt: skip
        said = next(f for f in report.findings if f.check == "pipeline_parallel")
        monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0|1")
        capfd.readouterr()  # the ranks' output from here on
        error = None
        try:
            kw = engine_kwargs(pipeline_parallel_size=2, distributed_executor_backend="mp")
            llm = LLM(model=str(TARGET), speculative_config=spec, **kw)
            del llm
            gc.collect()
        except Exception as e:  # noqa: BLE001 (what stopped it is read from the ranks)
            error = e
        ranks = "".join(capfd.readouterr())
        refused = PP_REFUSED.search(ranks)
        assert (SAYS_REFUSED in said.message) == bool(refused), (said.message, error)
        if refused:
            assert error is not None and said.severity == "error", (said.message, error)
            assert SAYS_REFUSED + refused.group(1) in said.message, (said.message, ranks[-800:])
