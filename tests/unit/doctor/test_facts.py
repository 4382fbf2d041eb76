"""doctor/facts.py: each Rules field has its probe, and the probes read
the shapes vLLM writes them in (snippets cut from real releases; every
pinned release: tests/integration/doctor/test_releases_real.py)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from vpatch import lock
from vpatch.doctor import anchors, facts

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
    assert facts.read(files).values["transformers"] == majors


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
    got = facts.read({F["configs"]: CONFIGS, F["registry"]: REGISTRY, F["vllm"]: VLLM_V2}).values
    assert got["own_configs"] == {"kimi_k2", "kimi_k25"}
    assert got["archs"] == {"Eagle3LlamaForCausalLM", "Eagle3DeepseekV2ForCausalLM"}
    assert got["v2_default"] == {"DeepseekV2ForCausalLM"}  # the targets doctor serves only
    every = VLLM_V2.replace("self._is_default_v2_model_runner_model()", "True")
    assert facts.read({F["vllm"]: every}).values["v2_default"] == {"*"}
    assert facts.read({}).values["v2_default"] == frozenset()
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


# -- anchors: what each probe reads, and what it cannot read ---------------------


def render(tree: dict, indent: str = "", method: bool = False) -> str:
    """Python for nested scopes {name: {inner: ...}}: classes holding the
    scopes under them, a function for a leaf below the top."""
    out = []
    for name, inner in tree.items():
        if inner or not method:
            out.append(
                f"{indent}class {name}:\n"
                + (render(inner, indent + "    ", True) if inner else f"{indent}    pass\n")
            )
        else:
            out.append(f"{indent}def {name}(self):\n{indent}    pass\n")
    return "".join(out)


def stub(scope: str) -> str:
    tree: dict = {}
    node = tree
    for part in scope.split("."):
        node = node.setdefault(part, {})
    return render(tree)


def path_of(pattern: str) -> str:
    """A file a FILES pattern (a glob, or "a | b") names."""
    return pattern.split(" | ")[0].replace("*", "x")


def every_anchor() -> dict[str, str]:
    """A release made of stubs, holding every anchor any probe asks for: a
    stub for each missing one, read again until none is missing. The GPU
    worker builds both runners (so the probes gated on the V1 runner ask
    for its code too)."""
    head = {
        facts.FILES["worker"]: f"class Worker:\n    {facts.V1_MODULE} x\n    {facts.V2_MODULE} y\n"
        "    def __init__(self):\n        pass\n"
    }
    scopes: dict[str, dict] = {}
    extra: dict[str, str] = {}

    def files() -> dict[str, str]:
        out = {p: render(t) for p, t in scopes.items()}
        for p, text in {**extra, **head}.items():
            out[p] = out.get(p, "") + text
        return out

    for _ in range(20):
        missing = {
            a for field in facts.read(files()).anchors.values() for a, ok in field.items() if not ok
        }
        if not missing:
            return files()
        for a in missing:
            path = path_of(a.file)
            scope = a.scope.split(":")[0].strip()
            if scope == "_SPECULATIVE_DECODING_MODELS":
                extra[path] = extra.get(path, "") + "_SPECULATIVE_DECODING_MODELS = {}\n"
            elif scope == "_CONFIG_REGISTRY":
                extra[path] = (
                    extra.get(path, "") + "_CONFIG_REGISTRY = LazyConfigDict(\n    a=1,\n)\n"
                )
            elif path == facts.FILES["worker"]:
                raise AssertionError(f"the stub worker lacks {a}")
            elif scope:
                node = scopes.setdefault(path, {})
                for part in scope.split("."):
                    node = node.setdefault(part, {})
            else:
                extra.setdefault(path, "# present\n")
    raise AssertionError(f"anchors still missing: {sorted(missing)}")


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


def without(files: dict[str, str], a: facts.Anchor) -> dict[str, str]:
    """`files` with anchor `a` gone: its file, or its scope renamed."""
    path = path_of(a.file)
    if not a.scope:
        return {p: t for p, t in files.items() if p != path}
    name = re.escape(a.scope.split(".")[-1])
    return {**files, path: re.sub(rf"\b{name}\b", f"{name}_gone", files[path])}


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
