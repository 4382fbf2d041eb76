"""`vpatch doctor`'s verdicts on MLA EAGLE-3 drafters (0.18.0 and later),
each against what the release running this process does with the same
drafter: the real CLI's finding is an error exactly when this vLLM (patched
or not: doctor reads `vpatch check`) gets it wrong.

The drafters are shaped like the public Kimi MLA drafters (mla_drafters.py:
``Eagle3DeepseekV2ForCausalLM``, ``model_type: kimi_k2``, YaRN, draft vocab
= vocab), config only, for the tiny DeepSeek-V3 target; what vLLM does is
read where test_mla_drafter_config.py, test_mla_drafter_layer.py and
test_mla_drafter_fc_norm.py read it (MLA attention is not built on CPU
before 0.28.0, and the tier runs its target without MLA):

* ``mla_detection``: the draft model config is MLA (``is_deepseek_mla``):
  where it is not, a plain serve (no KV connector, method eagle3) is a
  warning, never an error: nothing a plain serve runs reads the draft's
  use_mla (rules.toml draft_mla_readers; test_served_mla_drafters.py counts
  the same drafts either way);
* ``rope``: a drafter without ``rope_scaling`` gets a rotary base of its own
  ``rope_theta`` (the load fails under transformers 5 where it does not);
* ``norms``: a drafter with ``fc_norm`` has it applied to what its fc gets.
"""

from __future__ import annotations

import pytest
import torch
from test_mla_drafter_layer import attention_arguments, draft_hf_config, rotary
from tier_builders.doctor_pairs import severity, verdict
from tier_builders.mla_drafters import (
    KIMI_ROPE_THETA,
    draft_model_config,
    flag,
    kimi_mla_drafter_config,
    write_drafter,
)

# MLA EAGLE-3 drafters exist from 0.18.0 (not on 0.15-0.17: releases.inner_select)
pytestmark = pytest.mark.mla_drafter


def _doctor(paths, tmp_path, **overrides):
    drafter = write_drafter(tmp_path / "doctor", kimi_mla_drafter_config(**overrides))
    return verdict(paths["deepseek_v3"], drafter)


def test_mla_detection_verdict_matches_vllm(paths, tmp_path):
    report = _doctor(paths, tmp_path)
    drafter = write_drafter(tmp_path / "vllm", kimi_mla_drafter_config())
    is_mla = flag(draft_model_config(paths, drafter).is_deepseek_mla)
    said = severity(report, "mla_detection")
    assert said != "error", report.to_text()
    assert (said == "warning") == (not is_mla), report.to_text()


def test_rope_verdict_matches_vllm(paths, tmp_path, monkeypatch):
    report = _doctor(paths, tmp_path, rope_scaling=None)
    try:
        config = draft_hf_config(paths, tmp_path, rope_scaling=None)
        emb = rotary(attention_arguments(config, monkeypatch), config.qk_rope_head_dim)
        right = float(emb.base) == KIMI_ROPE_THETA
    except KeyError:  # transformers 5 unpatched: the YaRN branch without a factor
        right = False
    assert (severity(report, "rope") == "error") == (not right), report.to_text()


def test_fc_norm_verdict_matches_vllm(paths, tmp_path):
    from test_mla_drafter_fc_norm import AUX, HIDDEN, combine

    report = _doctor(paths, tmp_path, fc_norm=True)
    states = torch.randn(2, AUX * HIDDEN) * 40.0
    applied = not torch.equal(combine(states), states)
    assert (severity(report, "norms") == "error") == (not applied), report.to_text()
