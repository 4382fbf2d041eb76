"""doctor/facts.py: each Rules field has its probe, and the probes read
the shapes vLLM writes them in (snippets cut from real releases; every
pinned release: tests/integration/doctor/test_releases_real.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from vpatch import lock
from vpatch.doctor import facts

F = facts.FILES


def test_every_field_of_rules_has_a_probe():
    assert sorted(facts.PROBES) == sorted(facts.fields_of_rules())


@pytest.mark.parametrize(
    ("files", "majors"),
    [
        ({F["requirements"]: "transformers >= 4.56.0, < 5\n"}, (4,)),
        ({F["requirements"]: "transformers >= 4.56.0, != 5.0.*, != 5.5.0\n"}, (4, 5)),
        ({F["requirements"]: "transformers >= 5.5.3\n"}, (5,)),
        ({F["requirements"]: "transformers >= 5.16.1, < 5.21.0 # pinned\n"}, (5,)),
        # 0.15.x: wheels only, their Requires-Dist
        ({"vllm-0.15.0.dist-info/METADATA": "Requires-Dist: transformers<5,>=4.56.0\n"}, (4,)),
        ({}, ()),
    ],
)
def test_transformers_majors(files, majors):
    assert facts.read(files)["transformers"] == majors


CONFIGS = """
_CONFIG_REGISTRY: dict[str, type[PretrainedConfig]] = LazyConfigDict(
    deepseek_v32="DeepseekV3Config",
    kimi_k2="DeepseekV3Config",  # Kimi K2 uses same architecture as DeepSeek V3
    kimi_k25="KimiK25Config",
)
"""

REGISTRY = """
_SPECULATIVE_DECODING_MODELS = {
    "Eagle3LlamaForCausalLM": ("llama_eagle3", "Eagle3LlamaForCausalLM"),
    "Eagle3DeepseekV2ForCausalLM": ("deepseek_eagle3", "Eagle3DeepseekV2ForCausalLM"),
    "PEagleLlamaForCausalLM": ("llama_eagle3", "PEagle"),
    "MedusaModel": ("medusa", "Medusa"),
}
"""

VLLM_V2 = """
DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES = frozenset(
    ["DeepseekV2ForCausalLM", "LlamaForCausalLM"]
)
class VllmConfig:
    @property
    def use_v2_model_runner(self):
        return self._is_default_v2_model_runner_model()
"""


def test_values_read_from_code():
    got = facts.read({F["configs"]: CONFIGS, F["registry"]: REGISTRY, F["vllm"]: VLLM_V2})
    assert got["own_configs"] == {"kimi_k2", "kimi_k25"}
    assert got["archs"] == {"Eagle3LlamaForCausalLM", "Eagle3DeepseekV2ForCausalLM"}
    assert got["v2_default"] == {"DeepseekV2ForCausalLM"}  # the targets doctor serves only
    every = VLLM_V2.replace("self._is_default_v2_model_runner_model()", "True")
    assert facts.read({F["vllm"]: every})["v2_default"] == {"*"}
    assert facts.read({})["v2_default"] == frozenset()
    # an MLA drafter class without kimi_k2 in the eagle branch: not MLA
    assert got["kimi_k2_drafter_not_mla"] is True


def test_a_fact_that_differs_is_named():
    r = lock.load().rules.at("0.30.0")
    found = {f: getattr(r, f) for f in facts.fields_of_rules()}
    assert facts.differences(found, r) == {}
    assert facts.differences({**found, "v2_supports_pp": False}, r) == {
        "v2_supports_pp": (True, False)
    }
    assert facts.differences(found, replace(r, transformers=(4,))) == {"transformers": ((4,), (5,))}


DEEPSEEK = """
class DeepseekV2Model:
    def forward(self):
        for idx, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer)):
            if idx in self.aux_hidden_state_layers:
                pass
class DeepseekV2ForCausalLM(SupportsEagle3):
    def get_eagle3_aux_hidden_state_layers(self):
        return (2, num_layers // 2, num_layers - 3)
"""


def test_what_doctor_takes_as_the_same_is_checked():
    files = {F["deepseek"]: DEEPSEEK}
    assert facts.SAME[0][0] not in facts.broken(files)
    assert facts.SAME[1][0] not in facts.broken(files)
    moved = DEEPSEEK.replace("num_layers - 3", "num_layers - 2")
    assert facts.SAME[0][0] in facts.broken({F["deepseek"]: moved})
    # before EAGLE-3 is upstream the series writes that code: not asked of upstream
    bare = moved.replace("(SupportsEagle3)", "")
    assert facts.SAME[0][0] not in facts.broken({F["deepseek"]: bare})
    assert "the PP split: releases.pp_indices" in facts.broken(files)


def test_what_no_probe_reads_says_why():
    assert facts.NOT_PROBED and all(len(why) > 40 for why in facts.NOT_PROBED.values())
