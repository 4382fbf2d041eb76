"""The per-release facts `vpatch doctor` checks pairs against
(vpatch/doctor/releases.py) re-read from every pinned release's own source
(sdists for 0.16.0+, the wheel's Python files for 0.15.x, from the cache):
the table must say what the code does, release by release."""

from __future__ import annotations

import ast
import re

import pytest
from vpatch import lock
from vpatch.doctor import releases
from vpatch.sources import files

pytestmark = pytest.mark.integration

FILES = {
    "deepseek": "vllm/model_executor/models/deepseek_v2.py",
    "llama3": "vllm/model_executor/models/llama_eagle3.py",
    "registry": "vllm/model_executor/models/registry.py",
    "v1": "vllm/v1/worker/gpu_model_runner.py",
    "v2": "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
    "vllm": "vllm/config/vllm.py",
    "algos": "vllm/transformers_utils/configs/speculators/algos.py",
    "spec_base": "vllm/transformers_utils/configs/speculators/base.py",
    "eagle_cfg": "vllm/transformers_utils/configs/eagle.py",
    "speculative": "vllm/config/speculative.py",
    "pp": "vllm/distributed/utils.py",
    "mla_drafter": "vllm/model_executor/models/deepseek_eagle3.py",
}
TARGET_ARCHS = {"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"}


@pytest.fixture(scope="module", params=releases.known_releases(lock.load()))
def src(request):
    tree = files.release_files(lock.load().get(request.param), set(FILES.values()))
    text = {}
    for k, rel in FILES.items():
        p = tree / rel
        text[k] = p.read_text() if p.is_file() else ""
    return request.param, text


def find(tree: ast.AST, path: str) -> ast.AST | None:
    node = tree
    for part in path.split("."):
        node = next(
            (
                n
                for n in ast.walk(node)
                if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part
            ),
            None,
        )
        if node is None:
            return None
    return node


def seg(text: str, path: str) -> str:
    node = find(ast.parse(text), path) if text else None
    return ast.get_source_segment(text, node) if node else ""


def test_target_support_and_default_ids(src):
    v, t = src
    r = releases.rules(v)
    cls = find(ast.parse(t["deepseek"]), "DeepseekV2ForCausalLM")
    bases = {ast.unparse(b) for b in cls.bases}
    assert ("SupportsEagle3" in bases) == r.upstream_eagle3
    if r.upstream_eagle3:
        body = seg(t["deepseek"], "DeepseekV2ForCausalLM.get_eagle3_aux_hidden_state_layers")
        assert "(2, num_layers // 2, num_layers - 3)" in body


def test_aux_state_collection(src):
    v, t = src
    r = releases.rules(v)
    fwd = seg(t["deepseek"], "DeepseekV2Model.forward")
    assert ("self.end_layer in self.aux_hidden_state_layers" in fwd) == r.final_norm_id
    if r.upstream_eagle3:
        # every id is looked up among the owned layers only: others are dropped
        assert "islice(self.layers, self.start_layer, self.end_layer)" in fwd
        assert "idx in self.aux_hidden_state_layers" in fwd


def test_fc_width_and_norms(src):
    v, t = src
    r = releases.rules(v)
    model = seg(t["llama3"], "LlamaModel.__init__")
    if r.fc_width == "three":
        assert "target_hidden_size * 3" in model and "num_aux_hidden_states" not in model
    else:
        assert 'getattr(\n                self.config, "num_aux_hidden_states", None' in model
        assert 'eagle_config.get("eagle_aux_hidden_state_layer_ids")' in model
        assert "target_hidden_size * self.num_aux_hidden_states" in model
    assert ("norm_before_fc" in t["llama3"]) == r.norm_before_fc
    assert ("fc_norm" in t["llama3"]) == r.fc_norm
    layer = seg(t["llama3"], "LlamaDecoderLayer.__init__")
    assert 'getattr(config, "norm_before_residual", False)' in layer


def test_d2t(src):
    v, t = src
    r = releases.rules(v)
    init = seg(t["llama3"], "Eagle3LlamaForCausalLM.__init__")
    assert ("self.config.draft_vocab_size != target_vocab_size" in init) == (
        r.d2t_only_if_vocab_differs
    )
    loads = seg(t["llama3"], "Eagle3LlamaForCausalLM.load_weights")
    # no d2t in the checkpoint: the zero-initialised mapping is left as it is
    assert "includes_draft_id_mapping" in loads and "draft_id_to_target_id" in loads
    assert "torch.zeros(self.config.draft_vocab_size, dtype=torch.long)" in init


def test_where_ids_are_read(src):
    v, t = src
    r = releases.rules(v)
    v1 = seg(t["v1"], "GPUModelRunner._get_eagle3_aux_layers_from_config")
    assert "eagle_aux_hidden_state_layer_ids" in v1
    assert ('eagle_config.get("eagle_aux_hidden_state_layer_ids")' in v1) == (r.v1_reads_nested_ids)
    v2 = seg(t["v2"], "get_eagle3_aux_layers_from_config")
    assert 'eagle_config.get("eagle_aux_hidden_state_layer_ids")' not in v2
    assert ('drafter_config.get("layer_ids")' in v2) == (r.v2_nested_key == "layer_ids")


def test_v2_runner_default_and_pp(src):
    v, t = src
    r = releases.rules(v)
    prop = seg(t["vllm"], "VllmConfig.use_v2_model_runner")
    if not prop:
        assert not r.v2_default and not r.v2_supports_pp
        return
    if "_is_default_v2_model_runner_model()" in prop:
        m = re.search(
            r"DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES = frozenset\((.*?)\)\n", t["vllm"], re.S
        )
        listed = set(re.findall(r'"(\w+)"', m.group(1)))
        assert r.v2_default == listed & TARGET_ARCHS
    else:
        assert r.v2_default == {"*"}
    refuses_pp = '"EAGLE3 with pipeline parallelism"' in t["vllm"]
    assert r.v2_supports_pp == (
        not refuses_pp and "verify_supports_aux_hidden_states_over_pp" in t["v2"]
    )


def test_speculators_conversion(src):
    v, t = src
    r = releases.rules(v)
    upd = seg(t["algos"], "update_eagle3")
    assert '"norm_before_residual", True' in upd
    assert ("eagle3_arch_map" in upd) == r.speculators_arch_by_type
    copied = set(re.findall(r'config_dict\.get\("(\w+)", False\)', upd))
    assert copied == set(r.speculators_copies)
    frm = seg(t["spec_base"], "SpeculatorsConfig.from_pretrained")
    assert ("extract_vllm_speculative_config" in frm) == r.speculators_validated


def test_architectures(src):
    v, t = src
    r = releases.rules(v)
    tree = ast.parse(t["registry"])
    spec = next(
        n.value
        for n in ast.walk(tree)
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        and getattr(n.targets[0] if isinstance(n, ast.Assign) else n.target, "id", "")
        == "_SPECULATIVE_DECODING_MODELS"
    )
    known = {
        ast.literal_eval(k)
        for k, val in zip(spec.keys, spec.values, strict=True)
        if "eagle3" in ast.literal_eval(val)[0]
        and not ast.literal_eval(k).lower().startswith("peagle")
    }
    assert known == set(r.archs)
    rename = seg(t["eagle_cfg"], "EAGLEConfig.__init__")
    assert 'arch.startswith("Eagle3") or arch.endswith("Eagle3")' in rename
    override = seg(t["speculative"], "SpeculativeConfig.hf_config_override")
    for mt in releases.MTP_REWRITE[:2]:
        assert f'"{mt}"' in override


def test_pp_split_is_the_same(src):
    _, t = src
    body = seg(t["pp"], "get_pp_indices")
    assert "for i in range(2, remaining_layers + 2):" in body
    assert "partitions[-i] += 1" in body
    assert "VLLM_PP_LAYER_PARTITION" in body


def test_mla_drafter_rope_and_fc_norm(src):
    """deepseek_eagle3.py: without rope_scaling the decoder layer rebuilds its
    rope as {"rope_type": "default"}, dropping rope_theta (before 0.28.0); it
    builds fc_norm from 0.22.0 but combine_hidden_states applies it only from
    0.23.0."""
    v, t = src
    r = releases.rules(v)
    code = t["mla_drafter"]
    assert bool(code) == ("Eagle3DeepseekV2ForCausalLM" in r.archs)
    if not code:
        return
    layer = seg(code, "DeepseekV2Eagle3DecoderLayer.__init__")
    assert ('{"rope_type": "default"}' in layer) == r.mla_rope_without_theta
    combine = seg(code, "Eagle3DeepseekV2ForCausalLM.combine_hidden_states")
    assert ("fc_norm" in combine) == r.mla_fc_norm
