"""What each patch-effect test fails with on the unpatched install: the one
place that says so, keyed by the span of releases whose vLLM fails that way.

A test names its failure in its marker, ``@pytest.mark.patch_effect(
unpatched.EAGLE3_REFUSED)``; on the unpatched install (the tier's runs set
``VPATCH_VLLM_VARIANT=unpatched``) conftest.py makes it a strict xfail that
must raise exactly that for the running release (``pytest.RaisesExc``: the
exception's class and a regex searched in its message). So pytest itself
holds fail-to-pass: a patch-effect test that passes unpatched (XPASS), that
fails with another exception or message, or that names no failure for the
running release, fails the run.

Each failure was seen on the releases named beside it (2026-12-02, the
tier's default releases: 0.15.0-0.17.1, 0.19.1, 0.22.1, 0.26.0, 0.32.0); the
spans are where the same vLLM code runs (read from the sdists).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Span:
    first: str
    last: str
    raises: type[BaseException]
    match: str  # a regex searched in str(exception)

    def covers(self, release: tuple[int, ...]) -> bool:
        return _v(self.first) <= release <= _v(self.last)

    def describe(self) -> str:
        return f"{self.raises.__name__} matching {self.match!r}"


def _v(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in release.split("."))


def fails(first: str, last: str, raises: type[BaseException], match: str) -> tuple[Span, ...]:
    return (Span(first, last, raises, match),)


def span_of(failure: tuple[Span, ...], release: tuple[int, ...]) -> Span | None:
    return next((s for s in failure if s.covers(release)), None)


def xfail(failure: tuple[Span, ...], release: tuple[int, ...]) -> pytest.MarkDecorator | None:
    """The strict xfail of ``failure`` on ``release``, or None if no span
    covers it."""
    span = span_of(failure, release)
    if span is None:
        return None
    return pytest.mark.xfail(
        strict=True,
        raises=pytest.RaisesExc(span.raises, match=span.match),
        reason=f"unpatched: {span.describe()}",
    )


# The series of 0.15.0-0.17.1 carry EAGLE-3 itself; from 0.18.0 the
# series carry the layer-0 fix and fixes of other upstream defects.
EAGLE3 = ("0.15.0", "0.17.1")
LAYER0 = ("0.18.0", "0.33.0")

# -- EAGLE-3 (0.15.0-0.17.1) ---------------------------------------------------

# the targets have no aux-layer interface (0.15.0, 0.17.1)
DEEPSEEK_NO_AUX = fails(
    *EAGLE3,
    AttributeError,
    r"'DeepseekV3ForCausalLM' object has no attribute "
    r"'(get_eagle3_aux_hidden_state_layers|set_aux_hidden_state_layers)'",
)
KIMI_NO_AUX = fails(
    *EAGLE3,
    AttributeError,
    r"'KimiK25ForConditionalGeneration' object has no attribute "
    r"'(get_eagle3_aux_hidden_state_layers|set_aux_hidden_state_layers)'",
)
# supports_eagle3(DeepseekV2/V3ForCausalLM, KimiK25ForConditionalGeneration) is False
NOT_EAGLE3 = fails(*EAGLE3, AssertionError, r"where False = <function supports_eagle3 at ")
# the proposer reads the target config's image_token_index, which Kimi-K2.5's lacks
KIMI_NO_IMAGE_TOKEN_INDEX = fails(
    *EAGLE3, AttributeError, r"'KimiK25Config' object has no attribute 'image_token_index'"
)
# the GPU model runner's load_model (the CPU runner's through cpu_spec_decode)
# refuses a target without the EAGLE-3 interface (0.17.1: a series cut short,
# test_series_cut_short.py)
NO_EAGLE3_INTERFACE = fails(
    *EAGLE3,
    RuntimeError,
    r"Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested",
)


def _refused(model_type: str = r"'[^']*'") -> tuple[Span, ...]:
    """SpeculativeConfig refuses eagle3 for a target of text model_type
    ``model_type`` (a regex; pydantic's ValidationError, a ValueError):
    0.15.0-0.16.0 say "Eagle3", 0.17.x the method's name (read from the
    sdists; seen on 0.15.0, 0.15.1, 0.17.1)."""
    got = r" models\. Got self\.target_model_config\.hf_text_config\.model_type=" + model_type
    return fails(
        "0.15.0", "0.16.0", ValueError, r"Eagle3 is only supported for \[[^\]]*\]" + got
    ) + fails("0.17.0", "0.17.1", ValueError, r"eagle3 is only supported for \[[^\]]*\]" + got)


EAGLE3_REFUSED = _refused()
# the served targets: the tiny DeepSeek-V3, and Kimi-K2.5, whose text model
# is DeepSeek-V3's (0.15.1, 0.17.1; served through cpu_spec_decode)
EAGLE3_REFUSED_DEEPSEEK_V3 = _refused("'deepseek_v3'")

# -- the layer-0 fix (0.18.0-0.33.0) -------------------------------------------

# layer 0 has no residual yet, and vLLM adds None to it (0.19.1, 0.26.0,
# 0.32.0; in the served engine: at the first generate on 0.32.0, in the
# profile run on 0.26.0)
LAYER0_PLUS_NONE = fails(
    *LAYER0, TypeError, r"unsupported operand type\(s\) for \+: 'Tensor' and 'NoneType'"
)
# the same, met by Dynamo tracing the compiled target at engine start (0.32.0)
LAYER0_PLUS_NONE_COMPILED = fails(
    *LAYER0, RuntimeError, r"unsupported operand type\(s\) for \+: 'FakeTensor' and 'NoneType'"
)
# the same in the ranks of a tensor-parallel engine, which vLLM's
# multiprocessing executor reports (0.32.0: at the first generate; 0.26.0:
# in the profile run, the served fixture's setup)
LAYER0_PLUS_NONE_IN_A_RANK = fails(
    *LAYER0,
    RuntimeError,
    r"Worker failed with error 'unsupported operand type\(s\) for \+: 'Tensor' and 'NoneType''",
)
# aux layers with layer 0: no interface before 0.18.0, None + tensor after
LAYER0_AUX = DEEPSEEK_NO_AUX + LAYER0_PLUS_NONE

# -- the other fixes -------------------------------------------------------------

# id n (the final norm's input) matches no layer before PR #46973: the
# target returns one state fewer (0.19.1)
FINAL_NORM_ID_DROPPED = fails(
    "0.18.0",
    "0.24.0",
    AssertionError,
    r"2 aux hidden states for layers \(2, 4, 8\)",
)

# the drafter keeps its own 64 positions (0.15.0, 0.17.1, 0.19.1, 0.26.0)
SHORT_DRAFT_POSITIONS = fails(
    "0.15.0",
    "0.26.0",
    AssertionError,
    r"the drafter's max_position_embeddings is 64, the target serves 256",
)
# and its rotary cache has no position past them (CPU's face of the CUDA
# device-side assert)
SHORT_ROTARY_CACHE = fails(
    "0.15.0",
    "0.26.0",
    pytest.fail.Exception,
    r"the drafter's rotary cache has 64 positions, the target serves 256: "
    r"index out of range in self",
)
# the V1 proposer builds the drafter with the target's forced backend
# (0.15.0, 0.17.1, 0.19.1)
V1_DRAFTER_FORCED_BACKEND = fails(
    "0.15.0", "0.20.2", AssertionError, r"the drafter is built with the target's FLASHINFER_MLA"
)
# the V2 runner's load_eagle_model the same, unset (0.32.0); an explicit
# draft backend is dropped on 0.29.0 only (test_drafter_attention_backend.py)
V2_DRAFTER_FORCED_BACKEND = fails(
    "0.29.0",
    "0.33.0",
    AssertionError,
    r"the drafter is built with FLASHINFER_MLA, not (None|TRITON_ATTN)",
)
# is_deepseek_mla's EAGLE branch lacks kimi_k2 (0.19.1, 0.26.0, 0.32.0)
MLA_NOT_DETECTED = fails(*LAYER0, AssertionError, r"the kimi_k2 MLA drafter is not detected as MLA")
# a drafter without rope_scaling gets {"rope_type": "default"}: transformers 4
# (0.18.0-0.19.1) then takes its default theta (0.19.1), transformers 5
# (0.20.0 on) asks for a YaRN factor (0.26.0)
ROPE_THETA_LOST = fails(
    "0.18.0", "0.19.1", AssertionError, re.escape("assert 10000.0 == 50000.0")
) + fails("0.20.0", "0.27.1", KeyError, r"^'factor'$")
# combine_hidden_states hands fc the states unnormed (0.22.1)
FC_NORM_SKIPPED = fails(
    "0.22.0", "0.22.1", AssertionError, r"fc got the aux states without fc_norm"
)
