"""The attention backend an EAGLE-3 drafter is built with when the target's
is forced (`--attention-backend`, `attention_config.backend`): on 8xB200 an
MLA backend for DeepSeek-V3 / Kimi-K2.5, which CUDA refuses for the Llama
drafter's layers at drafter load ("Selected backend ... is not valid for
this configuration"): the server never starts.

* ``drafter_backend`` (patch
  spec-decode-the-drafter-selects-its-own-attention-backend, the V1
  proposer): the drafter is built with no forced backend (it selects its
  own), and the target keeps its own.
* ``drafter_backend_v2`` (patch
  spec-decode-v2-the-drafter-selects-its-own-attention-backend, the V2
  model runner's load_eagle_model, the default runner for these targets from
  0.29.0): the same, and a backend the speculative config names is the
  drafter's. Its loader is called directly: a served V2 engine on CPU cannot
  show the effect (docs/cpu-bugs.md, "The V2 model runner on CPU").

(The releases of each patch are patches.toml's.)

CPU never refuses a backend (its platform logs "Cannot use ... on CPU" and
picks its own), so the decision is checked: vLLM's real proposer load path
runs with the target's config forcing FLASHINFER_MLA, up to the drafter's
``get_model``, which records the attention backend of the config it is
handed and stops there. What only a GPU shows is the refusal itself.
"""

from __future__ import annotations

import importlib

import pytest
import torch
import unpatched
from helpers import eagle3_engine_config, vllm_release
from tier_plugins.versions import version

FORCED = "FLASHINFER_MLA"


class _Built(Exception):
    """Raised by the recording get_model: the drafter is not built."""


def _forced(cfg):
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    cfg.attention_config.backend = AttentionBackendEnum[FORCED]
    return cfg


def _name(backend) -> str | None:
    return getattr(backend, "name", backend)


def _recording_get_model(monkeypatch, modules: tuple[str, ...]) -> dict:
    """get_model in each of ``modules`` (the names the drafter's load calls)
    records the backend of the config it gets, then raises _Built."""
    seen: dict = {}

    def get_model(*, vllm_config, **kw):
        seen["backend"] = _name(vllm_config.attention_config.backend)
        raise _Built

    for name in modules:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "get_model"):
            monkeypatch.setattr(mod, "get_model", get_model)
    return seen


def _v1_drafter_backend(cfg, monkeypatch) -> str | None:
    """The backend the V1 proposer's load_model builds the drafter with."""
    from vllm.config import set_current_vllm_config
    from vllm.v1.spec_decode.eagle import EagleProposer

    # eagle.py up to 0.19.1, llm_base_proposer.py (the base proposer) from 0.20.0
    seen = _recording_get_model(
        monkeypatch, ("vllm.v1.spec_decode.eagle", "vllm.v1.spec_decode.llm_base_proposer")
    )
    with set_current_vllm_config(cfg):
        proposer = EagleProposer(cfg, torch.device("cpu"))
        with pytest.raises(_Built):  # before the target model is used
            proposer.load_model(None)
    return seen["backend"]


def _v2_drafter_backend(cfg, monkeypatch) -> str | None:
    """The backend the V2 runner's load_eagle_model builds the drafter with
    (it reads vLLM's parallel groups: the caller holds the session's llm)."""
    from vllm.config import set_current_vllm_config
    from vllm.v1.worker.gpu.spec_decode.eagle import utils

    seen = _recording_get_model(monkeypatch, (utils.__name__,))
    with set_current_vllm_config(cfg), pytest.raises(_Built):  # before the target is used
        utils.load_eagle_model(None, cfg)
    return seen["backend"]


@pytest.mark.patch_effect(unpatched.V1_DRAFTER_FORCED_BACKEND)
@pytest.mark.drafter_backend
def test_v1_drafter_is_built_without_the_targets_forced_backend(paths, monkeypatch):
    cfg = _forced(eagle3_engine_config(paths["deepseek_v3"], paths["eagle3"]))
    got = _v1_drafter_backend(cfg, monkeypatch)
    assert _name(cfg.attention_config.backend) == FORCED  # the target keeps its own
    assert got is None, f"the drafter is built with the target's {got}"


# An unset draft backend inherits the target's forced one on every release
# of the V2 runner; an explicit one is dropped by 0.29.0 only (0.30.0 on apply
# it when set): a patch effect there, a premise that holds on both installs
# from 0.30.0.
V2_DRAFT = [
    pytest.param(
        None, marks=pytest.mark.patch_effect(unpatched.V2_DRAFTER_FORCED_BACKEND), id="unset"
    ),
    pytest.param(
        "TRITON_ATTN",
        marks=[pytest.mark.patch_effect(unpatched.V2_DRAFTER_FORCED_BACKEND)]
        if vllm_release() < version("0.30.0")
        else [],
        id="explicit",
    ),
]


@pytest.mark.kernels  # both params in both kernel modes, as a patch effect runs
@pytest.mark.drafter_backend_v2
@pytest.mark.parametrize("draft", V2_DRAFT)
def test_v2_drafter_gets_the_speculative_configs_backend(llm, paths, monkeypatch, draft):
    # llm: vLLM's parallel groups, which the draft load config reads (pipeline rank)
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    cfg = _forced(eagle3_engine_config(paths["deepseek_v3"], paths["eagle3"]))
    if draft is not None:
        cfg.speculative_config.attention_backend = AttentionBackendEnum[draft]
    got = _v2_drafter_backend(cfg, monkeypatch)
    assert _name(cfg.attention_config.backend) == FORCED  # the target keeps its own
    assert got == draft, f"the drafter is built with {got}, not {draft}"


def test_doctor_forced_backend_verdict_matches_vllm(llm, paths, monkeypatch):
    """`vpatch doctor -- vllm serve ... --attention-backend FLASHINFER_MLA`
    calls the forced backend an error exactly when the model runner doctor
    names (V1 or V2 on this release, as on GPU) hands it to the drafter here
    (patched or not: doctor reads `vpatch check`). VLLM_MLA_DISABLE=0 in the
    command: the tier runs its target without MLA, a user's B200 does not."""
    import json

    from tier_builders.doctor_pairs import verdict_serve

    spec = {"method": "eagle3", "model": paths["eagle3"], "num_speculative_tokens": 3}
    report = verdict_serve(
        "VLLM_MLA_DISABLE=0",
        "vllm",
        "serve",
        paths["deepseek_v3"],
        "--attention-backend",
        FORCED,
        "--speculative-config",
        json.dumps(spec),
    )
    said = next(f for f in report.findings if f.check == "attention_backend")
    cfg = _forced(eagle3_engine_config(paths["deepseek_v3"], paths["eagle3"]))
    load = _v2_drafter_backend if "V2 model runner" in said.message else _v1_drafter_backend
    got = load(cfg, monkeypatch)
    assert (said.severity == "error") == (got == FORCED), (got, report.to_text())
