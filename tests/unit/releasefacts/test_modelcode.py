"""releasefacts/modelcode.py on synthetic sources shaped as vLLM writes them:
the registry and a package's platform dispatch read per platform, the
capture sites of a decoder told apart, SupportsEagle3 through a base class
of another file, the variables a capture reads and their defaults, and the
release facts of speculative.py, interfaces.py and eagle3_utils.py. (The
real releases: tests/integration/doctor/test_releases_real.py.)"""

from __future__ import annotations

import textwrap

import pytest
from vpatch import lock
from vpatch.releasefacts import modelcode
from vpatch.releasefacts.anchors import Source

PINS = lock.load()
T = PINS.serving


def src(files: dict[str, str]) -> Source:
    return modelcode._source({k: textwrap.dedent(v) for k, v in files.items()}, T)


REGISTRY = """
_TEXT_GENERATION_MODELS = {
    "DeepseekV32ForCausalLM": (
        "vllm.models.deepseek_v32",
        "DeepseekV32ForCausalLM",
    ),
    "GlmMoeDsaForCausalLM": ("vllm.models.deepseek_v32", "GlmMoeDsaForCausalLM"),
    "KimiK3ForConditionalGeneration": ("vllm.models.kimi_k3", "KimiK3ForConditionalGeneration"),
}
_SPECULATIVE_DECODING_MODELS = {
    "K3DSparkModel": ("vllm.models.kimi_k3.nvidia.dspark_mla", "K3DSparkForCausalLM"),
    "KimiK3MTPModel": ("vllm.models.kimi_k3", "KimiK3MTP"),
    "DFlashDraftModel": ("qwen3_dflash", "DFlashQwen3ForCausalLM"),
}
"""
V32_INIT = """
from vllm.platforms import current_platform

if current_platform.is_cuda():
    from .nvidia.model import DeepseekV32ForCausalLM
    from .nvidia.model import DeepseekV32ForCausalLM as GlmMoeDsaForCausalLM
elif current_platform.is_rocm():
    from .amd.model import DeepseekV32ForCausalLM
    from .amd.model import DeepseekV32ForCausalLM as GlmMoeDsaForCausalLM
else:
    from vllm.model_executor.models.deepseek_v2 import (
        DeepseekV3ForCausalLM as DeepseekV32ForCausalLM,
    )
    from vllm.model_executor.models.deepseek_v2 import GlmMoeDsaForCausalLM
"""
K3_INIT = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from .nvidia.model import KimiK3ForConditionalGeneration
elif current_platform.device_type == "tpu":
    pass
elif current_platform.is_rocm():
    from .amd.model import KimiK3ForConditionalGeneration  # type: ignore[assignment]
else:
    from .nvidia.model import KimiK3ForConditionalGeneration
"""
DEFINES = "class DeepseekV32ForCausalLM(DeepseekV2ForCausalLM):\n    pass\n"
K3_DEFINES = "class KimiK3ForConditionalGeneration(nn.Module, SupportsEagle3):\n    pass\n"
FILES = {
    "vllm/model_executor/models/registry.py": REGISTRY,
    "vllm/models/deepseek_v32/__init__.py": V32_INIT,
    "vllm/models/deepseek_v32/nvidia/model.py": DEFINES,
    "vllm/models/deepseek_v32/amd/model.py": DEFINES,
    "vllm/model_executor/models/deepseek_v2.py": "class DeepseekV3ForCausalLM:\n    pass\n"
    "class GlmMoeDsaForCausalLM:\n    pass\n",
    "vllm/models/kimi_k3/__init__.py": K3_INIT,
    "vllm/models/kimi_k3/nvidia/model.py": K3_DEFINES,
    "vllm/models/kimi_k3/amd/model.py": K3_DEFINES,
}


@pytest.mark.parametrize(
    ("arch", "platform", "want"),
    [
        (
            "DeepseekV32ForCausalLM",
            "cuda",
            "vllm/models/deepseek_v32/nvidia/model.py:DeepseekV32ForCausalLM",
        ),
        (
            "DeepseekV32ForCausalLM",
            "rocm",
            "vllm/models/deepseek_v32/amd/model.py:DeepseekV32ForCausalLM",
        ),
        (
            "DeepseekV32ForCausalLM",
            "cpu",
            "vllm/model_executor/models/deepseek_v2.py:DeepseekV3ForCausalLM",
        ),
        # an alias: the class the dispatch binds under the registry's name
        (
            "GlmMoeDsaForCausalLM",
            "cuda",
            "vllm/models/deepseek_v32/nvidia/model.py:DeepseekV32ForCausalLM",
        ),
        (
            "GlmMoeDsaForCausalLM",
            "xpu",
            "vllm/model_executor/models/deepseek_v2.py:GlmMoeDsaForCausalLM",
        ),
        # TYPE_CHECKING is false when vLLM runs; the device_type branch is TPU's
        (
            "KimiK3ForConditionalGeneration",
            "cuda",
            "vllm/models/kimi_k3/nvidia/model.py:KimiK3ForConditionalGeneration",
        ),
        (
            "KimiK3ForConditionalGeneration",
            "rocm",
            "vllm/models/kimi_k3/amd/model.py:KimiK3ForConditionalGeneration",
        ),
        (
            "KimiK3ForConditionalGeneration",
            "cpu",
            "vllm/models/kimi_k3/nvidia/model.py:KimiK3ForConditionalGeneration",
        ),
        ("DeepseekV41ForCausalLM", "cuda", ""),  # not registered
    ],
)
def test_the_registry_and_the_dispatch_name_the_serving_file(arch, platform, want):
    assert modelcode.serves(src(FILES), arch, platform) == want


def test_a_dispatch_it_cannot_read_is_an_anchor_missing():
    """A condition the probe does not know (not a platform test) reads no
    route and marks the dispatch's anchor missing: a carry reports the fact
    unreadable instead of a value."""
    files = {
        **FILES,
        "vllm/models/kimi_k3/__init__.py": K3_INIT.replace(
            "current_platform.is_rocm()", "envs.SOMETHING"
        ),
    }
    s = src(files)
    assert modelcode.serves(s, "KimiK3ForConditionalGeneration", "rocm") == ""
    assert any(not found and "dispatch" in a.scope for a, found in s.asked.items())


def test_the_family_drafters_are_the_registry_s_of_its_modules():
    s = src(FILES)
    got = {k for k, m in modelcode.drafters(s).items() if modelcode._package(m) == "kimi_k3"}
    assert got == {"K3DSparkModel", "KimiK3MTPModel"}


def decoder(body: str, bases: str = "nn.Module, EagleModelMixin") -> str:
    return textwrap.dedent(f"""
    class M({bases}):
        supports_aux_hidden_states_over_pp = True

        def forward(self, hidden_states, residual):
    """) + textwrap.indent(textwrap.dedent(body), " " * 8)


@pytest.mark.parametrize(
    ("body", "id0", "id_n"),
    [
        # V3.2's own package from its guard: the embedding when residual is None
        (
            """
        for idx, layer in enumerate(self.layers):
            if idx in self.aux_hidden_state_layers:
                aux.append(hidden_states if residual is None else hidden_states + residual)
            hidden_states, residual = layer(hidden_states, residual)
        """,
            "embedding",
            False,
        ),
        # deepseek_v2.py / V3.2 amd before 0.34: hidden_states + None
        (
            """
        for idx, layer in enumerate(self.layers):
            if idx in self.aux_hidden_state_layers:
                aux.append(hidden_states + residual)
            hidden_states, residual = layer(hidden_states, residual)
        """,
            "typeerror",
            False,
        ),
        # V4: after each layer, and the end layer
        (
            """
        for idx, layer in enumerate(self.layers):
            hidden_states = layer(hidden_states)
            if idx + 1 in self.aux_hidden_state_layers:
                aux.append(hidden_states.mean(dim=1))
        if self.end_layer in self.aux_hidden_state_layers:
            aux.append(hidden_states)
        """,
            "dropped",
            True,
        ),
        # K3: before the layers, then after each
        (
            """
        if self.start_layer in self.aux_hidden_state_layers:
            aux.append(hidden_states)
        for layer_idx, layer in enumerate(self.layers):
            hidden_states = layer(hidden_states)
            if (layer_idx + 1) in self.aux_hidden_state_layers:
                aux.append(hidden_states)
        """,
            "embedding",
            True,
        ),
        # K3 amd: EagleModelMixin._maybe_add_hidden_state at start_layer
        (
            """
        aux = self._maybe_add_hidden_state([], self.start_layer, hidden_states, residual)
        for layer_idx, layer in enumerate(self.layers):
            self._maybe_add_hidden_state(aux, layer_idx + 1, hidden_states, residual)
        """,
            "embedding",
            True,
        ),
        # V4.1 nvidia: each layer hands back the state before it; layer 0 none
        (
            """
        for idx, layer in enumerate(self.layers):
            x, previous = layer(x, capture_previous_aux=idx in self.aux_hidden_state_layers)
        if self.end_layer in self.aux_hidden_state_layers:
            final = x.mean(dim=1)
        """,
            "dropped",
            True,
        ),
    ],
)
def test_the_capture_sites_say_what_ids_0_and_n_give(body, id0, id_n):
    path = "vllm/models/kimi_k3/nvidia/model.py"
    s = src({path: K3_DEFINES + decoder(body)})
    got = modelcode.code(s, path, "KimiK3ForConditionalGeneration", "M")
    assert (got["id0"], got["id_n"]) == (id0, id_n)
    assert got["pp_relay"] and got["mixin"] and got["eagle3"]


def test_a_partial_sum_is_a_capture_before_a_deferred_all_reduce():
    body = """
    for idx, layer in enumerate(self.layers):
        if idx in self.aux_hidden_state_layers:
            aux.append(hidden_states if residual is None else hidden_states + residual)
        hidden_states, residual = layer(hidden_states, residual)
    """
    path = "vllm/models/deepseek_v32/nvidia/model.py"
    fused = "\ndef norm(h, r):\n    return fused_allreduce_rms_norm(h, r, n)\n"
    s = src({**FILES, path: DEFINES + decoder(body, "nn.Module") + fused})
    got = modelcode.code(s, path, "DeepseekV32ForCausalLM", "M")
    assert got["partial_sum"] and not got["mixin"]
    s = src({**FILES, path: DEFINES + decoder(body, "nn.Module")})
    assert not modelcode.code(s, path, "DeepseekV32ForCausalLM", "M")["partial_sum"]


def test_supports_eagle3_through_a_base_class_of_another_file():
    """DeepseekV32ForCausalLM(DeepseekV2ForCausalLM) inherits SupportsEagle3
    from deepseek_v2.py (bites: a probe that reads the class's own bases only
    says no)."""
    path = "vllm/models/deepseek_v32/nvidia/model.py"
    imports = "from vllm.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM\n"
    generic = "class DeepseekV2ForCausalLM(nn.Module, SupportsPP, SupportsEagle3):\n    pass\n"
    files = {**FILES, path: imports + DEFINES, "vllm/model_executor/models/deepseek_v2.py": generic}
    assert modelcode.code(src(files), path, "DeepseekV32ForCausalLM", "M")["eagle3"]
    files["vllm/model_executor/models/deepseek_v2.py"] = generic.replace(", SupportsEagle3", "")
    assert not modelcode.code(src(files), path, "DeepseekV32ForCausalLM", "M")["eagle3"]


def test_the_variables_a_capture_reads_with_their_defaults():
    path = "vllm/models/kimi_k3/nvidia/model.py"
    reads = "\ndef stream(self):\n    return envs.VLLM_KIMI_K3_AUX_ATTN_RES_STREAM\n"
    name = "VLLM_KIMI_K3_AUX_ATTN_RES_STREAM"
    envs = f'"{name}": lambda: bool(\n    int(os.getenv("{name}", "0"))\n)\n'
    files = {path: K3_DEFINES + decoder("pass\n") + reads, "vllm/envs.py": envs}
    got = modelcode.code(src(files), path, "KimiK3ForConditionalGeneration", "M")
    assert got["aux_env"] == "VLLM_KIMI_K3_AUX_ATTN_RES_STREAM=0"
    files["vllm/envs.py"] = envs.replace('"0"', '"1"')
    assert modelcode.code(src(files), path, "KimiK3ForConditionalGeneration", "M")[
        "aux_env"
    ].endswith("=1")


V2 = """
def get_eagle3_aux_layers_from_config(spec_config):
    layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
    if not layer_ids:
        layer_ids = [i + 1 for i in (dflash_config.get("target_layer_ids") or [])]
    if not layer_ids:
        dspark_layer_ids = getattr(hf_config, "dspark_target_layer_ids", None)
        if getattr(hf_config, "model_type", None) == "deepseek_v41":
            layer_ids = list(dspark_layer_ids)
        else:
            layer_ids = [i + 1 for i in dspark_layer_ids]
    return layer_ids
"""


def test_the_release_facts():
    files = {
        "vllm/config/speculative.py": (
            'aux_hidden_states_supported = [\n "llama",\n "deepseek_v3",\n]\n'
        ),
        "vllm/model_executor/models/interfaces.py": "class EagleModelMixin:\n"
        "    def _set_aux_hidden_state_layers(self, layers):\n"
        "        self.aux_hidden_state_layers = tuple(sorted(set(layers)))\n",
        "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py": V2,
    }
    got = modelcode.release(src(files))
    assert got == {
        "allowlist": frozenset({"llama", "deepseek_v3"}),
        "mixin_sorts": True,
        "dflash_ids": True,
        "dspark_ids": True,
        "dspark_as_written": frozenset({"deepseek_v41"}),
    }
    files["vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"] = V2.replace(
        "[i + 1 for i in dspark_layer_ids]", "list(dspark_layer_ids)"
    )
    files["vllm/model_executor/models/interfaces.py"] = "class EagleModelMixin:\n    pass\n"
    del files["vllm/config/speculative.py"]
    got = modelcode.release(src(files))
    assert (got["allowlist"], got["mixin_sorts"], got["dspark_ids"], got["dspark_as_written"]) == (
        frozenset(),
        False,
        False,
        frozenset(),
    )


def test_read_keys_are_the_table_s_and_differences_name_both_sides():
    reading = modelcode.read(FILES, T)
    expected = T.expected(PINS.rules.newest)
    assert {k for k in reading.values if not k.startswith("file ")} == {
        k for k in expected if not k.startswith("file ")
    }
    assert modelcode.differences({"a": 1, "b": 2}, {"a": 1, "c": 3}) == {
        "b": (None, 2),
        "c": (3, None),
    }


def test_a_serving_file_that_overrides_the_default_ids_is_broken():
    path = "vllm/models/kimi_k3/nvidia/model.py"
    interfaces = (
        "class SupportsEagle3:\n    def get_eagle3_default_aux_hidden_state_layers(self):\n"
        "        return (2, num_layers // 2, num_layers - 3)\n"
    )
    files = {"vllm/model_executor/models/interfaces.py": interfaces, path: K3_DEFINES}
    assert modelcode.broken(files, T) == []
    files[path] += (
        "    def get_eagle3_default_aux_hidden_state_layers(self):\n        return (1,)\n"
    )
    assert modelcode.broken(files, T) == [f"{path} overrides the default aux ids"]
    files["vllm/model_executor/models/interfaces.py"] = interfaces.replace("- 3", "- 2")
    assert len(modelcode.broken(files, T)) == 2
