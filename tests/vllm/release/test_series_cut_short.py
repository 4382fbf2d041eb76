"""A series cut short: the crash a user meets after applying only the first
fixes, in the order users met them (0.17.1). Each cut is an install of its own
made from the release's series with only some of its patches
(vllm_tier.targets.cut_short; vllm_tier.releases.CUT_SHORT names the cuts and
their patches); each test serves a target with the EAGLE-3 drafter and must
stop at engine start with the error users met there, raised by vLLM's own
code (through cpu_spec_decode's stand-ins on releases whose CPU runner
cannot serve EAGLE-3 by itself: the GPU runner's load_model runs there, so
its errors are its own). What each raises is declared in unpatched.py, as
the unpatched failures are:

* ``allowlist-only`` (speculative-allow-eagle3-for-deepseek-and-kimi-targets):
  SpeculativeConfig admits the targets, and then
  * the Kimi-K2.5 target stops in the proposer's load_model
    (``EagleProposer.load_model`` reads ``target_model.config.image_token_index``,
    which KimiK25Config does not have: it says media_placeholder_token_id);
  * the DeepSeek-V3 target stops in the GPU model runner's load_model:
    ``Model does not support EAGLE3 interface but aux_hidden_state_outputs
    was requested`` (DeepseekV3ForCausalLM lacks SupportsEagle3);
* ``allowlist-and-alias`` (+ eagle-alias-kimi-k2-5-media-placeholder-token-id):
  the Kimi-K2.5 target passes the proposer's load and stops at the same
  interface error (the wrapper lacks SupportsEagle3).

Runs only in a process of its own per cut (``VPATCH_VLLM_CUT=<cut>``: one
engine start per test; the tier's outer test_series_cut_short starts it).
"""

from __future__ import annotations

import gc
import os

import pytest
import unpatched
from helpers import NUM_SPECULATIVE_TOKENS, in_process, served_kwargs, vllm_release

CUT = os.environ.get("VPATCH_VLLM_CUT", "")

# cut: [(target fixture, what vLLM raises)], in the order users met them
EXPECTED: dict[str, list[tuple[str, tuple[unpatched.Span, ...]]]] = {
    "allowlist-only": [
        ("kimi_k25", unpatched.KIMI_NO_IMAGE_TOKEN_INDEX),
        ("deepseek_v3", unpatched.NO_EAGLE3_INTERFACE),
    ],
    "allowlist-and-alias": [("kimi_k25", unpatched.NO_EAGLE3_INTERFACE)],
}

pytestmark = pytest.mark.cut_short


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "expected" in metafunc.fixturenames:
        cases = EXPECTED.get(CUT)
        assert cases is not None, f"VPATCH_VLLM_CUT={CUT!r}: not one of {sorted(EXPECTED)}"
        metafunc.parametrize("expected", cases, ids=[c[0] for c in cases])


def test_the_cut_stops_where_users_stopped(expected, paths):
    name, failure = expected
    span = unpatched.span_of(failure, vllm_release())
    assert span is not None, f"unpatched.py declares no {name} failure for vLLM {vllm_release()}"
    in_process()
    from vllm import LLM

    with pytest.raises(span.raises, match=span.match):
        LLM(
            model=paths[name],
            speculative_config={
                "method": "eagle3",
                "model": paths["eagle3_layer0"],
                "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
            },
            **served_kwargs(compiled=False, target=name),
        )
    gc.collect()
