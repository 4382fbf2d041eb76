"""EAGLE-3 drafter variants for `vpatch doctor`'s tier tests, made at test time
from the tiny fixtures (tests/vllm/fixtures.py: target n = 8 layers, hidden
64, vocab 256), and the two sides each test compares:

* `verdict(...)` / `verdict_serve(...)`: what the real `vpatch doctor` CLI
  says about (target, variant), given as --target/--drafter or as the
  `vllm serve` command after `--`, on the vLLM running this process;
* `observe(...)`: what that vLLM does with the pair, step by step as serving
  does it: the speculative config (SpeculativeConfig via EngineArgs), the
  drafter load (the release's EagleProposer.load_model against the real
  target model), the aux layer ids the release's model runner asks for, the
  target forward that returns the aux states, and a draft step: the drafter's
  fc over the concatenated states, its decoder layer, compute_logits and the
  argmax. The CPU runner refuses speculative decoding, so the draft step runs
  the drafter's modules directly; attention there has no metadata, so its
  output values are not meaningful (shapes and control flow are), and the
  logits are taken on finite hidden states. A fc whose width does not match
  the states is caught before the call (the CPU GEMM aborts the process where
  CUDA's raises).
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from support.cli import vpatch

REPO = Path(__file__).resolve().parents[3]

DRAFT_VOCAB = 128  # < the target's 256: the drafter needs d2t


# ------------------------------------------------------------------ variants


@dataclass(frozen=True)
class Variant:
    name: str
    check: str  # the doctor check that speaks about what is wrong
    config: dict = field(default_factory=dict)  # keys set on the drafter config
    delete: tuple[str, ...] = ()  # keys removed from it
    fc_states: int = 3  # fc.weight is [hidden, fc_states * hidden_for_fc]
    fc_hidden: int | None = None  # None: the target's hidden size
    d2t: str = "spread"  # "spread": draft i -> target 2i; "none"; "zeros" (vocab stays 256)
    speculators: bool = False  # write it in the speculators format
    # The layers the drafter was trained on, in vLLM's terms (id k = the input
    # of layer k), as its maker knows them: None for the target's default.
    # Written ids of SGLang's convention (first id 1) name the output of layer k.
    trained: tuple[int, ...] | None = None


VARIANTS = {
    v.name: v
    for v in [
        Variant("good", "aux_layers"),
        Variant("speculators", "drafter_format", speculators=True),
        # draft vocab == target vocab, d2t zeros (what fixtures.py wrote before the
        # drafter was served; 0.30.0+ refuse it)
        Variant("same_vocab_d2t", "d2t", d2t="zeros"),
        Variant("no_d2t", "d2t", d2t="none"),
        Variant(
            "ids_out_of_range",
            "aux_layers",
            config={"eagle_aux_hidden_state_layer_ids": [2, 4, 99]},
        ),
        Variant(
            "final_norm_id", "aux_layers", config={"eagle_aux_hidden_state_layer_ids": [2, 4, 8]}
        ),
        Variant("layer0", "aux_layers", config={"eagle_aux_hidden_state_layer_ids": [0, 4, 5]}),
        Variant("two_states", "fc", config={"eagle_aux_hidden_state_layer_ids": [3, 6]}),
        Variant(
            "fc_four_states",
            "fc",
            config={"eagle_aux_hidden_state_layer_ids": [2, 3, 5, 7]},
            fc_states=4,
        ),
        Variant(
            "fc_four_states_num_aux",
            "fc",
            config={"eagle_aux_hidden_state_layer_ids": [2, 3, 5, 7], "num_aux_hidden_states": 4},
            fc_states=4,
        ),
        # ids in vLLM's convention, only in eagle_config (read by the V1
        # runner from 0.22.0, ignored elsewhere)
        Variant(
            "nested_only",
            "trained_layers",
            config={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [3, 4, 6]}},
            trained=(3, 4, 6),
        ),
        Variant(
            "nested_equals_default",
            "trained_layers",
            config={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 4, 5]}},
            trained=(2, 4, 5),
        ),
        # SpecForge's shape: nested only, SGLang's convention ([1, 3, 4] =
        # the outputs of layers 1, 3, 4 = vLLM's [2, 4, 5], the default)
        Variant(
            "nested_output_ids",
            "trained_layers",
            config={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}},
            trained=(2, 4, 5),
        ),
        # ... copied verbatim to the top level (doctor's old advice): one off
        Variant(
            "top_output_ids",
            "trained_layers",
            config={
                "eagle_aux_hidden_state_layer_ids": [1, 3, 4],
                "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]},
            },
            trained=(2, 4, 5),
        ),
        # ... converted to vLLM's convention at the top level: right everywhere
        Variant(
            "top_converted",
            "trained_layers",
            config={
                "eagle_aux_hidden_state_layer_ids": [2, 4, 5],
                "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]},
            },
            trained=(2, 4, 5),
        ),
        # speculators: vLLM's convention whatever the first id
        Variant(
            "speculators_first_id_1",
            "trained_layers",
            config={"eagle_aux_hidden_state_layer_ids": [1, 3, 4]},
            speculators=True,
            trained=(1, 3, 4),
        ),
        Variant("hidden_mismatch", "hidden_size", config={"target_hidden_size": 32}, fc_hidden=32),
        Variant(
            "mtp_rewrite",
            "drafter_format",
            config={"model_type": "deepseek_v3", "architectures": ["Eagle3DeepseekV3ForCausalLM"]},
        ),
    ]
}
# 256 positions under the target's 512 (vLLM's default max_model_len); checked
# with the serve command's --max-model-len (test_max_model_len_from_the_serve_command)
POSITIONS_SHORT = Variant(
    "positions_short", "max_model_len", config={"max_position_embeddings": 256}
)
# Without this key (the fixture has none) vLLM uses the target's default (2, 4, 5).
DEFAULT_IDS_KEY = "eagle_aux_hidden_state_layer_ids"


def make(fixtures: Path, out: Path, v: Variant) -> Path:
    """Write variant `v` of the tiny EAGLE-3 drafter into `out` (real
    weights, drawn from the fixture's)."""
    import torch
    from safetensors.torch import load_file

    base = fixtures / "eagle3"
    cfg = json.loads((base / "config.json").read_text())
    t = load_file(str(base / "model.safetensors"))
    hidden, vocab = cfg["hidden_size"], cfg["vocab_size"]
    gen = torch.Generator().manual_seed(7)

    t.pop("d2t"), t.pop("t2d")
    if v.d2t == "zeros":
        # the shape the fixture had before it was served: draft vocab ==
        # target vocab with an identity d2t (0.30.0+ refuse it at load)
        cfg["draft_vocab_size"] = vocab
        t["lm_head.weight"] = torch.randn(vocab, hidden, generator=gen) / math.sqrt(hidden)
        t["d2t"] = torch.zeros(vocab, dtype=torch.long)
        t["t2d"] = torch.ones(vocab, dtype=torch.bool)
    else:
        cfg["draft_vocab_size"] = DRAFT_VOCAB
        t["lm_head.weight"] = t["lm_head.weight"][:DRAFT_VOCAB].clone()
        if v.d2t == "spread":
            t["d2t"] = torch.arange(DRAFT_VOCAB, dtype=torch.long)  # draft i -> target 2i
            t2d = torch.zeros(vocab, dtype=torch.bool)
            t2d[::2] = True
            t["t2d"] = t2d
    width = v.fc_states * (v.fc_hidden or hidden)
    if width != t["fc.weight"].shape[1]:
        t["fc.weight"] = torch.randn(hidden, width, generator=gen) / math.sqrt(width)
    cfg.update(v.config)
    for k in v.delete:
        cfg.pop(k, None)
    if v.speculators:
        cfg = _speculators(cfg)
        t = {k.replace("midlayer.", "layers.0."): x for k, x in t.items()}
    return save(out, cfg, t)


def save(out: Path, cfg: dict, tensors: dict) -> Path:
    """A drafter checkpoint in ``out`` (made anew): config.json and
    model.safetensors."""
    from safetensors.torch import save_file

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def _speculators(cfg: dict) -> dict:
    top = ("draft_vocab_size", "target_hidden_size", DEFAULT_IDS_KEY, "architectures")
    layer = {k: x for k, x in cfg.items() if k not in top}
    out = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_config": {
            "algorithm": "eagle3",
            "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
            "verifier": {"architectures": ["DeepseekV3ForCausalLM"], "name_or_path": "tiny"},
        },
        "transformer_layer_config": layer,
        "draft_vocab_size": cfg["draft_vocab_size"],
        "target_hidden_size": None,
    }
    if DEFAULT_IDS_KEY in cfg:
        out[DEFAULT_IDS_KEY] = cfg[DEFAULT_IDS_KEY]
    return out


# ------------------------------------------------------------------ doctor's side


def vpatch_python() -> str:
    """The python the project's vpatch CLI runs under here, as a user runs
    it (support.cli.vpatch's `python`): `VPATCH_PYTHON`, the python the tier
    runs under, which has vpatch and its dependencies; this venv has neither
    unidiff nor GitPython. The CLI inherits this process's environment,
    PYTHONPATH included, so `--python sys.executable` sees the vLLM under
    test."""
    py = os.environ.get("VPATCH_PYTHON")
    if not py:
        raise RuntimeError("VPATCH_PYTHON is not set: run through the tier (tests/vllm/tier.py)")
    return py


def _json(proc: subprocess.CompletedProcess, ok_codes: tuple[int, ...]) -> dict:
    if proc.returncode not in ok_codes:
        raise AssertionError(f"vpatch exit {proc.returncode}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


@functools.cache
def _check() -> dict:
    return _json(
        vpatch(
            "check",
            "--python",
            sys.executable,
            "--format",
            "json",
            python=vpatch_python(),
            timeout=600,
        ),
        (0, 1),
    )


def environment():
    """What `vpatch check --python sys.executable` says about this process's
    vLLM: (its dist and version, whether EAGLE-3 is ready). Asked once: the
    vLLM of a process does not change, and every pair test wants it."""
    out = _check()
    vllm = out["vllm"]
    return SimpleNamespace(dist=vllm["dist"], version=vllm["version"]), out["eagle3_ready"]


def installed(key: str) -> bool:
    """Does `vpatch check` report the patch that fixes defect `key`
    (defects.fix) applied (or upstream) in this process's vLLM?"""
    from vpatch import lock
    from vpatch.doctor import defects

    slug = defects.fix(lock.load(), key)
    states = [st for name, st in _check()["patches"].items() if name[5:] == slug]
    return any(st in ("applied", "upstream") for st in states)


@dataclass
class Report:
    """`vpatch doctor --format json`, read back."""

    findings: list
    serve: str
    ok: bool
    uninterpreted: list = field(default_factory=list)

    def to_text(self) -> str:
        lines = [f"  {f.severity:8} {f.check}  {f.message}" for f in self.findings]
        return "\n".join([*lines, "", "ok" if self.ok else "NOT ok", self.serve])


@functools.cache
def verdict(target: Path, drafter: Path, pp: int = 1, given: tuple[str, ...] = ()) -> Report:
    """`vpatch doctor` on (target, drafter) with this process's vLLM (or, `given`,
    `--vllm RELEASE [--patched]` instead). Asked once per process."""
    args = ["doctor", "--target", str(target), "--drafter", str(drafter)]
    args += list(given) or ["--python", sys.executable]
    args += ["--pipeline-parallel-size", str(pp), "--format", "json"]
    return _report(_json(vpatch(*args, python=vpatch_python(), timeout=600), (0, 1)))


def verdict_serve(*command: str, given: tuple[str, ...] = ()) -> Report:
    """`vpatch doctor -- <command>` with this process's vLLM (or `given`)."""
    args = ["doctor", *(given or ("--python", sys.executable)), "--format", "json"]
    return _report(
        _json(vpatch(*args, "--", *command, python=vpatch_python(), timeout=600), (0, 1))
    )


def said(report: Report, where: str, python: str) -> tuple:
    """A report's verdict: ok, the serve command and each finding, with the
    vLLM's name in the findings (`where`) as `<vllm>` and `--python
    <python>` as `--python PY`, the words of a release given instead of an
    environment (`vpatch doctor --vllm`, docs/doctor.md)."""

    def words(m: str) -> str:
        return m.replace(where, "<vllm>").replace(f"--python {python}", "--python PY")

    return (
        report.ok,
        report.serve,
        [(f.check, f.severity, words(f.message)) for f in report.findings],
    )


def _report(out: dict) -> Report:
    found = [SimpleNamespace(**f) for f in out["findings"]]
    return Report(found, out["serve"], out["ok"], out.get("uninterpreted", []))


def severity(report, check: str) -> str:
    return next(f.severity for f in report.findings if f.check == check)


def rules():
    from vpatch import lock
    from vpatch.doctor import behaviour

    env, _ = environment()
    pins = lock.load()
    place = behaviour.place(env.version, behaviour.known_releases(pins))
    return pins.rules.at(place.release)


# ------------------------------------------------------------------ vLLM's side


@dataclass
class Outcome:
    stage: str  # "config" | "load" | "target" | "draft" (where it failed) or "ok"
    error: BaseException | None = None
    ids: tuple[int, ...] = ()
    proposer: object = None
    draft_ids: list[int] = field(default_factory=list)
    mapped: set[int] = field(default_factory=set)  # target ids the drafter can propose

    @property
    def failed(self) -> bool:
        return self.stage != "ok"


def speculative_engine_config(target: Path, drafter: Path):
    from helpers import engine_args

    spec = {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3}
    return engine_args(str(target), speculative_config=spec).create_engine_config()


def runner_ids(runner: str, sc, model) -> tuple[int, ...]:
    """The aux layer ids the release's model runner sets on the target: from
    the drafter config (V1: GPUModelRunner._get_eagle3_aux_layers_from_config;
    V2: eagle3_utils.get_eagle3_aux_layers_from_config), else the model's
    default."""
    if runner == "v2":
        from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import (
            get_eagle3_aux_layers_from_config,
        )

        ids = get_eagle3_aux_layers_from_config(sc)
    else:
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        ids = GPUModelRunner._get_eagle3_aux_layers_from_config(
            SimpleNamespace(speculative_config=sc)
        )
    return tuple(ids) if ids else tuple(model.get_eagle3_aux_hidden_state_layers())


def load(cfg, model):
    """The drafter loaded against ``model`` as the release loads it: its V1
    proposer (``EagleProposer.load_model``), or where the release has none
    (0.34.0 removed it with the V1 runner) the V2 runner's
    ``load_eagle_model``. Either way an object whose ``model`` is the
    drafter."""
    import torch
    from vllm.config import set_current_vllm_config

    try:
        from vllm.v1.spec_decode.eagle import EagleProposer
    except ModuleNotFoundError:  # no V1 proposer
        from vllm.v1.worker.gpu.spec_decode.eagle.utils import load_eagle_model

        with set_current_vllm_config(cfg):
            return SimpleNamespace(model=load_eagle_model(model, cfg))
    with set_current_vllm_config(cfg):
        proposer = EagleProposer(cfg, torch.device("cpu"))
        proposer.load_model(model)
    return proposer


def observe(target: Path, drafter: Path, model, vllm_config, runner: str) -> Outcome:
    """What this vLLM does with the pair (the model is the loaded target)."""
    import torch
    from helpers import direct_forward
    from vllm.config import set_current_vllm_config
    from vllm.forward_context import set_forward_context

    try:
        cfg = speculative_engine_config(target, drafter)
    except Exception as e:
        return Outcome("config", e)
    try:
        proposer = load(cfg, model)
    except Exception as e:
        return Outcome("load", e)
    ids = runner_ids(runner, cfg.speculative_config, model)
    try:
        model.set_aux_hidden_state_layers(ids)
        out = direct_forward(model, vllm_config)
        aux = out[1]
    except Exception as e:
        return Outcome("target", e, ids, proposer)
    finally:
        model.set_aux_hidden_state_layers(())
    drafter_model = proposer.model
    n_tok = aux[0].shape[0]
    states = torch.cat(aux, dim=-1)
    fc = getattr(drafter_model.model, "fc", None)
    if fc is not None and states.shape[-1] != fc.input_size:
        # On CUDA, F.linear raises "mat1 and mat2 shapes cannot be multiplied";
        # the CPU build's oneDNN GEMM aborts the whole process instead, so the
        # width the release built fc for is compared here, before the call.
        msg = (
            f"fc takes {fc.input_size} features, the states have {states.shape[-1]}: shape mismatch"
        )
        return Outcome("draft", RuntimeError(msg), ids, proposer)
    try:
        hidden = drafter_model.combine_hidden_states(states)
        with set_current_vllm_config(cfg), set_forward_context(None, cfg):
            drafted, _ = drafter_model(torch.arange(4, 4 + n_tok), torch.arange(n_tok), hidden)
        assert drafted.shape == hidden.shape
        gen = torch.Generator().manual_seed(0)
        logits = drafter_model.compute_logits(torch.randn(8, hidden.shape[-1], generator=gen))
    except Exception as e:
        return Outcome("draft", e, ids, proposer)
    finite = torch.isfinite(logits[0]).nonzero().flatten().tolist()
    return Outcome(
        "ok",
        ids=ids,
        proposer=proposer,
        draft_ids=logits.argmax(dim=-1).tolist(),
        mapped=set(finite),
    )
