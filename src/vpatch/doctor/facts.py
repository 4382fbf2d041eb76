"""doctor's per-release facts (releases.Rules) re-read from a release's own
source: one probe a field, as the patch probes read a release (probes.py's
checks where a fact is whether code is there; a regular expression or an
`ast` walk where it is a value), so that RULES can be checked against every
pinned release (tests/integration/doctor/test_releases_real.py) and a new
release's facts read before anyone writes them (when it is carried).

`read(files)` gives {field: value} from a release's files ({path: text},
the paths of FILES); a field whose file the release lacks reads as the
release behaves without it (no MLA drafter file: no MLA facts). Every
field of Rules is in PROBES or in NOT_PROBED, which says why a person reads
it instead (tests/unit/doctor/test_facts.py holds the two to Rules)."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from .. import probes
from ..rules import Rules
from .releases import MLA

FILES = {
    "eagle_cfg": "vllm/transformers_utils/configs/eagle.py",
    "pp": "vllm/distributed/utils.py",
    "deepseek": "vllm/model_executor/models/deepseek_v2.py",
    "llama3": "vllm/model_executor/models/llama_eagle3.py",
    "registry": "vllm/model_executor/models/registry.py",
    "v1": "vllm/v1/worker/gpu_model_runner.py",
    "v2": "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
    "v2_loader": "vllm/v1/worker/gpu/spec_decode/eagle/utils.py",
    "vllm": "vllm/config/vllm.py",
    "algos": "vllm/transformers_utils/configs/speculators/algos.py",
    "spec_base": "vllm/transformers_utils/configs/speculators/base.py",
    "speculative": "vllm/config/speculative.py",
    "mla_drafter": "vllm/model_executor/models/deepseek_eagle3.py",
    "mla_detect": "vllm/transformers_utils/model_arch_config_convertor.py",
    "configs": "vllm/transformers_utils/config.py",
    "proposer": "vllm/v1/spec_decode/*.py",
    "requirements": "requirements/common.txt",
    "metadata": "vllm-*.dist-info/METADATA",  # a wheel's requirements (0.15.x: no sdist)
}
# The targets doctor serves: what the V2 runner's default list is read for.
TARGET_ARCHS = frozenset(
    {"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"}
)
# The config types whose own class Rules.own_configs tells about.
CONFIG_TYPES = ("kimi_k25", "kimi_k2")


class Source:
    """A release's files by FILES' keys: text, parsed scopes."""

    def __init__(self, files: Mapping[str, str]):
        self.files = files

    def text(self, key: str) -> str:
        pattern = FILES[key]
        return next((t for p, t in self.files.items() if probes.matches(p, pattern)), "")

    def all(self, key: str) -> dict[str, str]:
        return {p: t for p, t in self.files.items() if probes.matches(p, FILES[key])}

    def segment(self, key: str, path: str) -> str:
        """The source of `path` (Class.method, or a function) in the file."""
        text = self.text(key)
        node = _find(_parse(text), path) if text else None
        return (ast.get_source_segment(text, node) or "") if node else ""

    def holds(self, key: str, **check: Any) -> bool:
        """A probes.py check on the file (the patch probes' mechanism)."""
        c = probes.Check(file=FILES[key], **check)
        return probes.holds([c], self.all(key))


@functools.lru_cache(maxsize=16)
def _parse(text: str) -> ast.AST:
    """A file's tree, once per text: the probes read a few large files often."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _find(tree: ast.AST, path: str) -> ast.AST | None:
    node = tree
    for part in path.split("."):
        found = next(
            (
                n
                for n in ast.walk(node)
                if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part
            ),
            None,
        )
        if found is None:
            return None
        node = found
    return node


def _upstream_eagle3(s: Source) -> bool:
    # DeepseekV2ForCausalLM lists SupportsEagle3 (vLLM asks the outer class)
    return s.holds("deepseek", cls="DeepseekV2ForCausalLM", has_base="SupportsEagle3")


def _final_norm_id(s: Source) -> bool:
    fwd = s.segment("deepseek", "DeepseekV2Model.forward")
    return "self.end_layer in self.aux_hidden_state_layers" in fwd


def _fc_width(s: Source) -> str:
    model = s.segment("llama3", "LlamaModel.__init__")
    return "config" if "num_aux_hidden_states" in model else "three"


def _v1_reads_nested_ids(s: Source) -> bool:
    v1 = s.segment("v1", "GPUModelRunner._get_eagle3_aux_layers_from_config")
    return 'eagle_config.get("eagle_aux_hidden_state_layer_ids")' in v1


def _v2_nested_key(s: Source) -> str:
    v2 = s.segment("v2", "get_eagle3_aux_layers_from_config")
    return "layer_ids" if 'drafter_config.get("layer_ids")' in v2 else ""


def _v2_default(s: Source) -> frozenset[str]:
    prop = s.segment("vllm", "VllmConfig.use_v2_model_runner")
    if not prop:
        return frozenset()
    if "_is_default_v2_model_runner_model()" not in prop:
        return frozenset({"*"})
    m = re.search(
        r"DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES = frozenset\((.*?)\)\n", s.text("vllm"), re.S
    )
    return frozenset(re.findall(r'"(\w+)"', m.group(1)) if m else ()) & TARGET_ARCHS


def _v2_supports_pp(s: Source) -> bool:
    if not s.segment("vllm", "VllmConfig.use_v2_model_runner"):
        return False
    refuses = '"EAGLE3 with pipeline parallelism"' in s.text("vllm")
    return not refuses and "verify_supports_aux_hidden_states_over_pp" in s.text("v2")


def _d2t(s: Source) -> bool:
    init = s.segment("llama3", "Eagle3LlamaForCausalLM.__init__")
    return "self.config.draft_vocab_size != target_vocab_size" in init


def _speculators_arch_by_type(s: Source) -> bool:
    return "eagle3_arch_map" in s.segment("algos", "update_eagle3")


def _speculators_copies(s: Source) -> frozenset[str]:
    upd = s.segment("algos", "update_eagle3")
    return frozenset(re.findall(r'config_dict\.get\("(\w+)", False\)', upd))


def _speculators_validated(s: Source) -> bool:
    frm = s.segment("spec_base", "SpeculatorsConfig.from_pretrained")
    return "extract_vllm_speculative_config" in frm


def _archs(s: Source) -> frozenset[str]:
    """registry.py _SPECULATIVE_DECODING_MODELS: the classes of EAGLE-3
    modules (P-EAGLE's aside)."""
    tree = _parse(s.text("registry"))
    for n in ast.walk(tree):
        target = n.targets[0] if isinstance(n, ast.Assign) else getattr(n, "target", None)
        if getattr(target, "id", "") != "_SPECULATIVE_DECODING_MODELS":
            continue
        value = getattr(n, "value", None)
        if not isinstance(value, ast.Dict):
            break
        out = set()
        for k, v in zip(value.keys, value.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and v.elts):
                continue
            module, name = v.elts[0], str(k.value)
            is_eagle3 = isinstance(module, ast.Constant) and "eagle3" in str(module.value)
            if is_eagle3 and not name.lower().startswith("peagle"):
                out.add(name)
        return frozenset(out)
    return frozenset()


def _forced_backend_crash(s: Source) -> frozenset[str]:
    """The runners that hand the target's forced backend to the drafter: the
    V1 proposer unless it builds the drafter's config without it (the
    attention_config it clears, 0.21.0), the V2 runner where it is the
    default for these targets and load_eagle_model does not always give the
    drafter the speculative config's backend."""
    out = set()
    v1_clears = probes.holds(
        [
            probes.Check(
                file=FILES["proposer"], cls="SpecDecodeBaseProposer", uses="attention_config"
            )
        ],
        s.all("proposer"),
    )
    if not v1_clears:
        out.add("v1")
    v2_gives_own = s.holds(
        "v2_loader", function="load_eagle_model", unconditional="attention_backend"
    )
    if "*" in _v2_default(s) and not v2_gives_own:
        out.add("v2")
    return frozenset(out)


def _mtp_rewrite(s: Source) -> frozenset[str]:
    """SpeculativeConfig.hf_config_override: the model types an `if` on
    hf_config.model_type (`in (...)` or `==`) rewrites to deepseek_mtp."""
    text = s.text("speculative")
    node = _find(_parse(text), "SpeculativeConfig.hf_config_override") if text else None
    out: set[str] = set()
    for n in ast.walk(node) if node else ():
        if not isinstance(n, ast.If) or not isinstance(n.test, ast.Compare):
            continue
        sets_mtp = any(
            isinstance(b, ast.Assign)
            and isinstance(b.value, ast.Constant)
            and b.value.value == "deepseek_mtp"
            for b in n.body
        )
        if not sets_mtp or "model_type" not in ast.unparse(n.test.left):
            continue
        for c in ast.walk(n.test):
            if isinstance(c, ast.Constant) and isinstance(c.value, str):
                out.add(c.value)
    return frozenset(out)


def _draft_positions_short(s: Source) -> bool:
    # SpeculativeConfig raises the drafter's max_position_embeddings (0.27.0)
    return not s.holds("speculative", cls="SpeculativeConfig", uses="max_position_embeddings")


def _mla_rope_without_theta(s: Source) -> bool:
    layer = s.segment("mla_drafter", "DeepseekV2Eagle3DecoderLayer.__init__")
    return '{"rope_type": "default"}' in layer


def _mla_fc_norm(s: Source) -> bool:
    return "fc_norm" in s.segment(
        "mla_drafter", "Eagle3DeepseekV2ForCausalLM.combine_hidden_states"
    )


def _kimi_k2_drafter_not_mla(s: Source) -> bool:
    if not MLA & _archs(s):
        return False
    return not s.holds(
        "mla_detect",
        function="ModelArchConfigConvertorBase.is_deepseek_mla",
        when="eagle",
        includes=("kimi_k2",),
    )


def _own_configs(s: Source) -> frozenset[str]:
    """transformers_utils/config.py _CONFIG_REGISTRY's keys among CONFIG_TYPES."""
    text = s.text("configs")
    m = re.search(r"_CONFIG_REGISTRY[^=]*=\s*LazyConfigDict\((.*?)\n\)", text, re.S)
    keys = set(re.findall(r"^\s*(\w+)\s*=", m.group(1), re.M)) if m else set()
    return frozenset(keys & set(CONFIG_TYPES))


def _transformers(s: Source) -> tuple[int, ...]:
    """The majors of transformers the release allows: requirements/common.txt
    (an sdist), else the wheel's Requires-Dist."""
    spec = ""
    m = re.search(r"^transformers\s*([^;#\n]*)", s.text("requirements"), re.M)
    if m:
        spec = m.group(1)
    else:
        m = re.search(r"^Requires-Dist: transformers\s*([^;\n]*)", s.text("metadata"), re.M)
        spec = m.group(1) if m else ""
    try:
        allowed = SpecifierSet(spec.strip().strip("()"))
    except InvalidSpecifier:
        return ()
    # an open upper bound admits majors no one has released: the candidates
    # are the majors the requirement names, from its lowest to its highest
    named = [int(x) for x in re.findall(r"(\d+)(?:\.[\d*]+)*", spec)]
    majors = range(min(named), max(named) + 1) if named else range(0)
    return tuple(
        major
        for major in majors
        if any(allowed.contains(f"{major}.{minor}.{p}") for minor in range(100) for p in range(10))
    )


PROBES: dict[str, Callable[[Source], Any]] = {
    "upstream_eagle3": _upstream_eagle3,
    "final_norm_id": _final_norm_id,
    "fc_width": _fc_width,
    "v1_reads_nested_ids": _v1_reads_nested_ids,
    "v2_nested_key": _v2_nested_key,
    "v2_default": _v2_default,
    "v2_supports_pp": _v2_supports_pp,
    "d2t_only_if_vocab_differs": _d2t,
    "speculators_arch_by_type": _speculators_arch_by_type,
    "speculators_copies": _speculators_copies,
    "speculators_validated": _speculators_validated,
    "norm_before_fc": lambda s: "norm_before_fc" in s.text("llama3"),
    "fc_norm": lambda s: "fc_norm" in s.text("llama3"),
    "archs": _archs,
    "forced_backend_crash": _forced_backend_crash,
    "draft_positions_short": _draft_positions_short,
    "mla_rope_without_theta": _mla_rope_without_theta,
    "mla_fc_norm": _mla_fc_norm,
    "kimi_k2_drafter_not_mla": _kimi_k2_drafter_not_mla,
    "own_configs": _own_configs,
    "transformers": _transformers,
    "mtp_rewrite": _mtp_rewrite,
}

# What doctor takes as the same in every release (releases.py writes it
# once, for all): (what, FILES key, scope, the code it needs there); each
# must hold on a new release, or doctor is wrong there. The first two only
# where EAGLE-3 is upstream (before, vpatch's series writes that code).
SAME: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "default aux ids (2, n // 2, n - 3): releases.default_ids",
        "deepseek",
        "DeepseekV2ForCausalLM.get_eagle3_aux_hidden_state_layers",
        ("(2, num_layers // 2, num_layers - 3)",),
    ),
    (
        "aux ids looked up among the rank's own layers (others dropped)",
        "deepseek",
        "DeepseekV2Model.forward",
        (
            "islice(self.layers, self.start_layer, self.end_layer)",
            "idx in self.aux_hidden_state_layers",
        ),
    ),
    (
        "norm_before_residual defaults to False",
        "llama3",
        "LlamaDecoderLayer.__init__",
        ('getattr(config, "norm_before_residual", False)',),
    ),
    (
        "d2t: zeros unless the checkpoint has one",
        "llama3",
        "Eagle3LlamaForCausalLM.__init__",
        ("torch.zeros(self.config.draft_vocab_size, dtype=torch.long)",),
    ),
    (
        "speculators: norm_before_residual defaults to True",
        "algos",
        "update_eagle3",
        ('"norm_before_residual", True',),
    ),
    (
        "EAGLEConfig renames architectures to Eagle3*: releases.effective",
        "eagle_cfg",
        "EAGLEConfig.__init__",
        ('arch.startswith("Eagle3") or arch.endswith("Eagle3")',),
    ),
    (
        "deepseek_v3 drafters become MTP heads: Rules.mtp_rewrite",
        "speculative",
        "SpeculativeConfig.hf_config_override",
        ('"deepseek_v3"', '"deepseek_v32"'),
    ),
    (
        "the PP split: releases.pp_indices",
        "pp",
        "get_pp_indices",
        ("for i in range(2, remaining_layers + 2):", "partitions[-i] += 1"),
    ),
)


def broken(files: Mapping[str, str]) -> list[str]:
    """The facts of SAME that do not hold on the release's files."""
    s = Source(files)
    upstream = _upstream_eagle3(s)
    out = []
    for i, (what, key, scope, needles) in enumerate(SAME):
        if i < 2 and not upstream:
            continue
        code = s.segment(key, scope)
        if not all(n in code for n in needles):
            out.append(what)
    return out


# What doctor states about a release that no probe of its source can read,
# and why: a person reads it (a carry lists these for a new release).
NOT_PROBED: dict[str, str] = {
    "TRANSFORMERS_CONFIGS, TRANSFORMERS_TOKENIZERS": "transformers' behaviour in the versions "
    "the release allows (its config classes and tokenizer mappings), not vLLM's source: "
    "tests/vllm/release/test_doctor_remote_code.py asks real vLLM in the tier",
    "forced_backend_crash (the failure)": "the probe reads whether a forced backend reaches "
    "the drafter; that CUDA then refuses an MLA backend for a Llama drafter's layers needs a "
    "GPU (the tier checks the backend the drafter is built with)",
}


def globs() -> set[str]:
    """The files (paths and globs) the probes read."""
    return set(FILES.values())


def read(files: Mapping[str, str]) -> dict[str, Any]:
    """{Rules field: its value} as the release's files ({path: text}) say."""
    s = Source(files)
    return {name: probe(s) for name, probe in PROBES.items()}


def differences(found: Mapping[str, Any], rules: Rules) -> dict[str, tuple[Any, Any]]:
    """{field: (RULES' value, the probe's)} where they differ."""
    return {k: (getattr(rules, k), v) for k, v in found.items() if getattr(rules, k) != v}


def fields_of_rules() -> list[str]:
    return [f.name for f in fields(Rules) if f.name != "release"]
