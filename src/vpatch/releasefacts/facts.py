"""doctor's per-release facts (rules.py's Rules) re-read from a release's own
source: one probe a field, as the patch probes read a release (probes.py's
checks where a fact is whether code is there; a regular expression or an
`ast` walk where it is a value), so that rules.toml can be checked against
every pinned release (tests/integration/doctor/test_releases_real.py) and a
new release's facts read before anyone writes them (when it is carried).

Every probe reads through a Source, which records its anchors: each file,
and each class or function in it, the probe looked at, and whether the
release has it. `read(files)` gives a Reading: each field's value and its
anchors. Where an anchor is absent the probe reads the release as it behaves
without that code (no MLA drafter file: no MLA facts), which is right for
code not written yet and wrong for code upstream removed: `unreadable(FROM,
TO)` names the fields whose anchor FROM has and TO lacks, and a carry
proposes no value for them (moved() says where the scope went, if a search
of TO finds it). Where a person learned how to read a release without the
code (the V1 model runner's removal), the probe asks a gate fact first
(`runners`), and asks for the removed code only where the gate says it is
there. Every field of Rules has its probe (tests/unit/releasefacts/test_facts.py);
NOT_PROBED names what doctor states that no probe can read."""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from .. import probes
from ..rules import CONFIG_TYPES, MLA, Rules
from . import speculative
from .anchors import Anchor, Source, parse

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
    "metadata": "vllm-*.dist-info/METADATA",  # a wheel's requirements (a release without an sdist)
    "worker": "vllm/v1/worker/gpu_worker.py",
    "platform": "vllm/platforms/interface.py",
    "speculator_cfg": "vllm/v1/worker/gpu/spec_decode/speculator_config.py",
    # the serve command's speculative config (speculative.py)
    **speculative.FILES,
}
# The targets doctor serves: what the V2 runner's default list is read for.
TARGET_ARCHS = frozenset(
    {"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"}
)


def _upstream_eagle3(s: Source) -> bool:
    # DeepseekV2ForCausalLM lists SupportsEagle3 (vLLM asks the outer class)
    return s.holds("deepseek", cls="DeepseekV2ForCausalLM", has_base="SupportsEagle3")


def _final_norm_id(s: Source) -> bool:
    fwd = s.segment("deepseek", "DeepseekV2Model.forward")
    return "self.end_layer in self.aux_hidden_state_layers" in fwd


def _fc_width(s: Source) -> str:
    model = s.segment("llama3", "LlamaModel.__init__")
    return "config" if "num_aux_hidden_states" in model else "three"


V1_MODULE = "from vllm.v1.worker.gpu_model_runner import"
V2_MODULE = "from vllm.v1.worker.gpu.model_runner import"


def _runners(s: Source) -> frozenset[str]:
    """The model runners the GPU worker builds (gpu_worker.py Worker): the V1
    runner (v1/worker/gpu_model_runner.py) and the V2 one
    (v1/worker/gpu/model_runner.py); a worker that imports neither is not
    read as none."""
    worker = s.segment("worker", "Worker")
    out = {r for r, line in (("v1", V1_MODULE), ("v2", V2_MODULE)) if line in worker}
    if not out:
        s._mark(Anchor(FILES["worker"], f"Worker: {V1_MODULE} / {V2_MODULE}"), False)
    return frozenset(out)


def _v2_env(s: Source) -> str:
    """How VLLM_USE_V2_MODEL_RUNNER is taken: "selects" (1 / 0 choose the
    runner: Worker.__init__, or VllmConfig.use_v2_model_runner), "must_be_1"
    (with V1 removed: Platform.validate_environ refuses any other value)."""
    if not s.gated or "v1" in s.fact("runners"):
        worker = s.segment("worker", "Worker.__init__")
        if "envs.VLLM_USE_V2_MODEL_RUNNER" in worker:
            return "selects"
        prop = s.segment("vllm", "VllmConfig.use_v2_model_runner")
        return "selects" if "VLLM_USE_V2_MODEL_RUNNER" in prop else "ignored"
    check = s.segment("platform", "Platform.validate_environ")
    if '"VLLM_USE_V2_MODEL_RUNNER"' in check and 'value != "1"' in check:
        return "must_be_1"
    return "ignored"


def _v1_reads_nested_ids(s: Source) -> bool:
    # no V1 runner: none reads them (the field is about V1)
    if s.gated and "v1" not in s.fact("runners"):
        return False
    v1 = s.segment("v1", "GPUModelRunner._get_eagle3_aux_layers_from_config")
    return 'eagle_config.get("eagle_aux_hidden_state_layer_ids")' in v1


def _v2_nested_key(s: Source) -> str:
    v2 = s.segment("v2", "get_eagle3_aux_layers_from_config")
    return "layer_ids" if 'drafter_config.get("layer_ids")' in v2 else ""


def _v2_default(s: Source) -> frozenset[str]:
    if s.gated and s.fact("runners") == {"v2"}:
        return frozenset({"*"})  # the only runner, for every target
    if s.gated and "envs.VLLM_USE_V2_MODEL_RUNNER" in s.segment("worker", "Worker.__init__"):
        return frozenset()  # the variable alone chooses V2 (default off)
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
    """EAGLE-3 with PP stays on the V2 runner (which checks the model's
    supports_aux_hidden_states_over_pp at load) instead of falling back to
    V1 (the runner's unsupported list names it)."""
    verifies = "verify_supports_aux_hidden_states_over_pp" in s.text("v2")
    if s.gated and s.fact("runners") == {"v2"}:
        return verifies  # no fallback: the runner takes PP and checks the model
    if s.gated and "envs.VLLM_USE_V2_MODEL_RUNNER" in s.segment("worker", "Worker.__init__"):
        return False
    if not s.segment("vllm", "VllmConfig.use_v2_model_runner"):
        return False
    refuses = '"EAGLE3 with pipeline parallelism"' in s.text("vllm")
    return not refuses and verifies


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
    tree = parse(s.text("registry"))
    for n in ast.walk(tree):
        target = n.targets[0] if isinstance(n, ast.Assign) else getattr(n, "target", None)
        if getattr(target, "id", "") != "_SPECULATIVE_DECODING_MODELS":
            continue
        value = getattr(n, "value", None)
        if not s._mark(Anchor(FILES["registry"], "_SPECULATIVE_DECODING_MODELS"), True):
            break
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
    s._mark(Anchor(FILES["registry"], "_SPECULATIVE_DECODING_MODELS"), False)
    return frozenset()


def _forced_backend_crash(s: Source) -> frozenset[str]:
    """The runners that hand the target's forced backend to the drafter: the
    V1 proposer (SpecDecodeBaseProposer) unless it builds the drafter's
    config without it (the attention_config it clears), the V2 runner where
    it is the default for these targets and load_eagle_model does not always
    give the drafter the speculative config's backend."""
    out = set()
    if not s.gated or "v1" in s.fact("runners"):
        proposer = s.defines("proposer", "SpecDecodeBaseProposer")
        check = probes.Check(
            file=FILES["proposer"], cls="SpecDecodeBaseProposer", uses="attention_config"
        )
        if not probes.holds([check], proposer):
            out.add("v1")
    v2_gives_own = s.holds(
        "v2_loader", function="load_eagle_model", unconditional="attention_backend"
    )
    if "*" in s.fact("v2_default") and not v2_gives_own:
        out.add("v2")
    return frozenset(out)


def _draft_caps_max_model_len(s: Source) -> frozenset[str]:
    """config/vllm.py VllmConfig._limit_max_model_len_to_draft: the runners
    on which the served max_model_len is lowered to a drafter's that does
    not share the target's positions (V2 only where it asks
    use_v2_model_runner; every runner the release has where it asks none)."""
    limit = s.segment("vllm", "VllmConfig._limit_max_model_len_to_draft")
    if not limit:
        return frozenset()
    if "use_v2_model_runner" in limit:
        return frozenset({"v2"})
    return frozenset(s.fact("runners"))


def _cache_only_rope_types(s: Source) -> frozenset[str]:
    """config/speculative.py _CACHE_ONLY_ROPE_TYPES: the RoPE types whose
    max_position_embeddings sizes only the cos/sin cache, so a drafter of
    those types shares the target's positions."""
    m = re.search(
        r"^_CACHE_ONLY_ROPE_TYPES\s*=\s*frozenset\(\s*\{(.*?)\}\s*\)",
        s.text("speculative"),
        re.S | re.M,
    )
    return frozenset(re.findall(r'"(\w+)"', m.group(1))) if m else frozenset()


def _mtp_rewrite(s: Source) -> frozenset[str]:
    """SpeculativeConfig.hf_config_override: the model types an `if` on
    hf_config.model_type (`in (...)` or `==`) rewrites to deepseek_mtp."""
    code = s.segment("speculative", "SpeculativeConfig.hf_config_override")
    node = parse(textwrap.dedent(code)) if code else None
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
    """Nothing raises the drafter's max_position_embeddings: no call of
    SpeculativeConfig._maybe_override_draft_max_position_embeddings, in
    config/speculative.py or (where the drafter's setup moved) in the V2
    runner's speculator_config.py."""
    s.segment("speculative", "SpeculativeConfig")
    call = "._maybe_override_draft_max_position_embeddings("
    return call not in s.text("speculative") and call not in s.text("speculator_cfg")


def _mla_rope_without_theta(s: Source) -> bool:
    layer = s.segment("mla_drafter", "DeepseekV2Eagle3DecoderLayer.__init__")
    return '{"rope_type": "default"}' in layer


def _mla_fc_norm(s: Source) -> bool:
    return "fc_norm" in s.segment(
        "mla_drafter", "Eagle3DeepseekV2ForCausalLM.combine_hidden_states"
    )


def _kimi_k2_drafter_not_mla(s: Source) -> bool:
    if not MLA & s.fact("archs"):
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
    m = re.search(r"\b_CONFIG_REGISTRY\b[^=]*=\s*LazyConfigDict\((.*?)\n\)", text, re.S)
    s._mark(Anchor(FILES["configs"], "_CONFIG_REGISTRY"), m is not None)
    # `name="Class",` and `**{"name": "Class"}` entries
    body = m.group(1) if m else ""
    keys = set(re.findall(r"^\s*(\w+)\s*=", body, re.M)) | set(re.findall(r'"(\w+)"\s*:', body))
    return frozenset(keys & set(CONFIG_TYPES))


def _transformers(s: Source) -> tuple[int, ...]:
    """The majors of transformers the release allows: requirements/common.txt
    (an sdist), else the wheel's Requires-Dist."""
    key, text = s.either("requirements", "metadata")
    line = (
        r"^transformers\s*([^;#\n]*)"
        if key == "requirements"
        else (r"^Requires-Dist: transformers\s*([^;\n]*)")
    )
    m = re.search(line, text, re.M)
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
    "runners": _runners,
    "v2_env": _v2_env,
    "draft_caps_max_model_len": _draft_caps_max_model_len,
    "cache_only_rope_types": _cache_only_rope_types,
    # the serve command's speculative config (speculative.py)
    **speculative.PROBES,
}

# What doctor takes as the same in every release (behaviour.py writes it
# once, for all): (what, FILES key, scope, the code it needs there); each
# must hold on a new release, or doctor is wrong there. The first two only
# where EAGLE-3 is upstream (before, vpatch's series writes that code).
SAME: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "default aux ids (2, n // 2, n - 3): behaviour.default_ids",
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
        "EAGLEConfig renames architectures to Eagle3*: behaviour.effective",
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
        "the PP split: behaviour.pp_indices",
        "pp",
        "get_pp_indices",
        ("for i in range(2, remaining_layers + 2):", "partitions[-i] += 1"),
    ),
)


def broken(files: Mapping[str, str]) -> list[str]:
    """The facts of SAME that do not hold on the release's files."""
    s = Source(files, FILES, PROBES)
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
    # speculative.py's facts
    "TRANSFORMERS_LACKS": "the config classes transformers lacks by major (kimi_k2 in 4 and "
    "5, kimi_k25 in 4), read in the tier's venvs (4.57.6, 5.19.0, 5.25.0): which drafter "
    "model types load nowhere without auto_map (behaviour.config_class_missing)",
    "DRAFT_MLA_USES": "what uses each reader of a draft's use_mla (KV transfer, methods "
    "dflash and dspark, dspark under PCP): read in the readers' callers; a new reader the "
    "probe finds is named by its file until a person says what uses it",
}


def globs() -> set[str]:
    """The files (paths and globs) the probes read."""
    return set(FILES.values()) | set(speculative.READER_GLOBS)


@dataclass
class Reading:
    """A release's facts as its source says: {field: value}, and {field:
    {anchor: whether the release has it}}."""

    values: dict[str, Any] = field(default_factory=dict)
    anchors: dict[str, dict[Anchor, bool]] = field(default_factory=dict)

    def missing(self, name: str) -> list[Anchor]:
        return sorted(a for a, found in self.anchors.get(name, {}).items() if not found)


def read(files: Mapping[str, str], gated: bool = True) -> Reading:
    """Every field's value and anchors as the release's files ({path: text})
    say (`gated`=False: without the gates, as the probes read before the V1
    runner's removal was known)."""
    s = Source(files, FILES, PROBES, gated)
    out = Reading()
    for name in PROBES:
        s.asked = {}
        out.values[name] = s.fact(name)
        out.anchors[name] = dict(s.asked)
    return out


def unreadable(before: Reading, after: Reading) -> dict[str, list[Anchor]]:
    """{field: its anchors `before` has and `after` lacks}: code the probe
    reads that went away, so what it reads of `after` is not the fact."""
    out = {}
    for name, anchors in after.anchors.items():
        gone = [
            a for a, found in anchors.items() if not found and before.anchors.get(name, {}).get(a)
        ]
        if gone:
            out[name] = sorted(gone)
    return out


def differences(found: Mapping[str, Any], rules: Rules) -> dict[str, tuple[Any, Any]]:
    """{field: (RULES' value, the probe's)} where they differ."""
    return {k: (getattr(rules, k), v) for k, v in found.items() if getattr(rules, k) != v}


def fields_of_rules() -> list[str]:
    return [f.name for f in fields(Rules) if f.name != "release"]
