"""releasefacts/facts.py: each Rules field has its probe, and the probes read
the shapes vLLM writes them in (snippets cut from real releases; every
pinned release: tests/integration/doctor/test_releases_real.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.facts import every_anchor, path_of, stub, without
from support.releases import first_where
from vpatch import lock
from vpatch.releasefacts import anchors, facts

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
        # a release published as wheels only: their Requires-Dist
        ({"vllm-9.9.1.dist-info/METADATA": "Requires-Dist: transformers<5,>=4.56.0\n"}, (4,)),
        ({}, ()),
    ],
)
def test_transformers_majors(files, majors):
    assert facts.read(files).values["transformers"] == majors


CONFIGS = """
_CONFIG_REGISTRY: dict[str, type[PretrainedConfig]] = LazyConfigDict(
    deepseek_v32="DeepseekV3Config",
    kimi_k2="DeepseekV3Config",  # Kimi K2 uses same architecture as DeepSeek V3
    kimi_k25="KimiK25Config",
    qwen3_next="Qwen3NextConfig",
    **{"deepseek_v41": "DeepseekV41Config"},
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
    got = facts.read({F["configs"]: CONFIGS, F["registry"]: REGISTRY, F["vllm"]: VLLM_V2}).values
    # CONFIG_TYPES only, a `**{...}` entry too (qwen3_next is no type doctor reads)
    assert got["own_configs"] == {"deepseek_v32", "deepseek_v41", "kimi_k2", "kimi_k25"}
    assert got["archs"] == {"Eagle3LlamaForCausalLM", "Eagle3DeepseekV2ForCausalLM"}
    assert got["v2_default"] == {"DeepseekV2ForCausalLM"}  # the targets doctor serves only
    every = VLLM_V2.replace("self._is_default_v2_model_runner_model()", "True")
    assert facts.read({F["vllm"]: every}).values["v2_default"] == {"*"}
    assert facts.read({}).values["v2_default"] == frozenset()
    # an MLA drafter class without kimi_k2 in the eagle branch: not MLA
    assert got["kimi_k2_drafter_not_mla"] is True


def test_a_fact_that_differs_is_named():
    r = lock.load().rules.at(first_where(lambda r: r.v2_supports_pp and r.transformers == (5,)))
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
    assert "the PP split: behaviour.pp_indices" in facts.broken(files)


def test_what_no_probe_reads_says_why():
    assert facts.NOT_PROBED and all(len(why) > 40 for why in facts.NOT_PROBED.values())


# -- anchors: what each probe reads, and what it cannot read ---------------------


EVERY = every_anchor()
ASKED = [
    (name, a)
    for name, anchors in facts.read(EVERY).anchors.items()
    for a in anchors
    if not a.scope.startswith("Worker:")
]


def test_every_probe_names_its_anchors():
    """Each field reads through anchors: a file at least."""
    anchors = facts.read(EVERY).anchors
    assert set(anchors) == set(facts.PROBES)
    assert all(anchors[name] for name in facts.PROBES)


@pytest.mark.parametrize(("name", "anchor"), ASKED, ids=[f"{n}:{a}" for n, a in ASKED])
def test_a_removed_anchor_makes_its_fact_unreadable(name, anchor):
    before, after = facts.read(EVERY), facts.read(without(EVERY, anchor))
    assert anchor in facts.unreadable(before, after).get(name, [])


SCOPED = [
    (n, a) for n, a in ASKED if a.scope and "." not in a.scope and not a.scope.startswith("_")
]


@pytest.mark.parametrize(("name", "anchor"), SCOPED, ids=[f"{n}:{a}" for n, a in SCOPED])
def test_a_moved_anchor_is_unreadable_and_found_where_it_went(name, anchor):
    moved_to = "vllm/somewhere_else.py"
    files = without(EVERY, anchor)
    files[moved_to] = stub(anchor.scope)
    assert anchor in facts.unreadable(facts.read(EVERY), facts.read(files)).get(name, [])
    assert anchors.moved(anchor, files) == [f"{moved_to} defines {anchor.scope.split('.')[-1]}"]


def test_code_never_written_reads_as_before_not_unreadable():
    """An anchor neither release has (code not written yet) is no removal."""
    empty = facts.read({})
    assert facts.unreadable(empty, empty) == {}


def test_without_the_v1_runner_its_facts_are_not_asked():
    """The gate: a worker that builds only the V2 runner; the V1 runner's
    code is neither asked for nor missed, and the facts say so."""
    v1 = (facts.FILES["v1"], path_of(facts.FILES["proposer"]))
    only_v2 = {p: t for p, t in EVERY.items() if p not in v1}
    only_v2[facts.FILES["worker"]] = f"class Worker:\n    {facts.V2_MODULE} y\n"
    before, after = facts.read(EVERY), facts.read(only_v2)
    assert after.values["runners"] == {"v2"} and after.values["v1_reads_nested_ids"] is False
    assert after.values["v2_default"] == {"*"}
    asked = {a for anchors in after.anchors.values() for a in anchors}
    assert (
        facts.Anchor(facts.FILES["v1"], "GPUModelRunner._get_eagle3_aux_layers_from_config")
        not in asked
    )
    ungated = facts.unreadable(facts.read(EVERY, gated=False), facts.read(only_v2, gated=False))
    assert {"v1_reads_nested_ids", "forced_backend_crash"} <= set(ungated)
    assert facts.unreadable(before, after) == {}
