"""doctor's checks of how the release's vLLM builds the drafter: its format
and class, MLA detection, the norms it reads or ignores, and its rotary
embedding (rope_theta, the YaRN range)."""

from __future__ import annotations

from ... import settings
from ..behaviour import config_class_missing, draft_mla_read, draft_mla_uses
from ..pair import Pair
from ..report import Finding
from .vllm import defect


def check_format(p: Pair) -> Finding:
    d, eff = p.drafter, p.eff
    problems = list(d.problems) + list(eff.problems)
    if not d.speculators and (missing := _config_class(p)):
        problems.append(missing)
    sev = "error" if problems else "info"
    if d.speculators:
        what = (
            "speculators format (speculators_model_type "
            f"{d.raw.get('speculators_model_type')!r}): vLLM builds "
            f"{'/'.join(eff.architectures) or 'nothing'} from transformer_layer_config"
        )
    else:
        archs = "/".join(d.raw.get("architectures") or []) or "no architectures"
        what = f"vLLM format ({archs}, model_type {d.raw.get('model_type')!r})"
    return Finding("drafter_format", sev, "; ".join([what, *problems]))


def _config_class(p: Pair) -> str:
    """Why the release cannot load the drafter's config.json ("" when it
    can): its model_type has no config class in vLLM's _CONFIG_REGISTRY
    (Rules.own_configs) nor in any transformers the release allows
    (behaviour.config_class_missing), and auto_map names none of the repo's,
    or does without --trust-remote-code (the draft's config is read with the
    target's trust_remote_code: config/speculative.py, ModelConfig of the
    draft)."""
    mt, r = p.drafter.raw.get("model_type"), p.rules
    if not config_class_missing(mt, r):
        return ""
    auto = p.drafter.raw.get("auto_map")
    named = auto.get("AutoConfig") if isinstance(auto, dict) else None
    remote = isinstance(named, str)
    if remote and p.serve.trust_remote_code:
        return ""
    since = p.pins.rules.first_where(lambda x: mt in x.own_configs)
    later = f" (vLLM has one from {since})" if since else ""
    majors = " or ".join(str(m) for m in r.transformers)
    where = (
        f"no config class for model_type {mt!r}: vLLM {r.release}'s _CONFIG_REGISTRY "
        f"(transformers_utils/config.py) has none{later}, nor does transformers {majors}, "
        f"which vLLM {r.release} allows (requirements/common.txt)"
    )
    if remote:
        return (
            f"{where}; its auto_map names {named}, which vLLM loads only with "
            "--trust-remote-code: without it the drafter's config is refused at startup"
        )
    return (
        f"{where}, and the config has no auto_map: loading the drafter's config fails at "
        "startup (ValueError: ... Transformers does not recognize this architecture), with or "
        "without --trust-remote-code; declare the model_type of the drafter's layers (llama "
        "for a Llama drafter, deepseek_v2 for an MLA one)"
    )


def check_architecture(p: Pair) -> Finding:
    eff = p.eff
    if eff.arch:
        return Finding("architecture", "info", f"vLLM {p.release} builds the drafter as {eff.arch}")
    names = ", ".join(eff.architectures) or "none"
    known = ", ".join(sorted(p.rules.archs))
    return Finding(
        "architecture",
        "error",
        f"vLLM {p.release} knows no EAGLE-3 drafter class {names} and fails at startup "
        f"(model architectures are not supported); it knows: {known}",
    )


def check_mla_detection(p: Pair) -> Finding:
    """A kimi_k2 MLA drafter's draft model config says use_mla=False
    (Rules.kimi_k2_drafter_not_mla). Its layers are MLA all the same
    (deepseek_eagle3.py builds DeepseekV2MLAAttention, which picks an MLA
    backend and gives the MLA KV cache spec itself; the served counts equal
    a deepseek_v2-declared drafter's: docs/measurements.md), so what the
    misreport costs is what reads the draft's use_mla (Rules.draft_mla_readers):
    an error where the command uses such a reader (behaviour.draft_mla_read),
    else a warning naming the release's readers."""
    mt, r, rel = p.cfg.get("model_type"), p.rules, p.release
    if not p.eff.mla:
        return Finding("mla_detection", "info", "not an MLA drafter")
    if mt != "kimi_k2" or not r.kimi_k2_drafter_not_mla:
        return Finding("mla_detection", "info", f"MLA drafter (model_type {mt!r})")
    what = (
        f"model_type 'kimi_k2': vLLM {rel}'s draft model config says use_mla=False for this "
        "MLA drafter (ModelConfig.is_deepseek_mla counts an EAGLE drafter as MLA only for "
        "model_type deepseek_v2/deepseek_v3)"
    )
    workaround = (
        "declare model_type deepseek_v2 in the drafter's config (deepseek_v3 would make it "
        "an MTP head)"
    )
    used = draft_mla_read(r, p.serve.kv_transfer, p.spec.get("method"))
    uses = draft_mla_uses(r)
    readers = "; ".join(uses)
    if used:
        return defect(
            p,
            "kimi_k2_mla",
            "mla_detection",
            f"{what}, and this command uses what reads it: {', '.join(used)} (vLLM {rel} reads "
            f"a draft's use_mla for {readers}), which then takes the MLA drafter for a non-MLA "
            "one",
            workaround,
            {},
        )
    slug, state = p.fix("kimi_k2_mla")
    if state == "installed":
        return Finding(
            "mla_detection", "info", f"{what}; fixed here: vpatch's patch {slug} is installed"
        )
    layers = (
        "its layers are MLA all the same (deepseek_eagle3.py: DeepseekV2MLAAttention, with an "
        "MLA backend and KV cache spec of its own), and a plain serve drafts as it does "
        "declared deepseek_v2 (docs/measurements.md)"
    )
    if uses:
        read = f"vLLM {rel} reads a draft's use_mla only for {readers}: this command uses none"
    else:
        read = f"nothing in vLLM {rel} reads a draft's use_mla"
    fixes = f"vpatch's series fixes it ({slug}); or " if slug and state != "none" else ""
    return Finding("mla_detection", "warning", f"{what}; {layers}; {read}; {fixes}{workaround}")


def check_norms(p: Pair) -> Finding:
    cfg, eff, d = p.cfg, p.eff, p.drafter
    nbr = bool(cfg.get("norm_before_residual", False))
    if d.speculators:
        src = "set" if "norm_before_residual" in d.raw else "absent: speculators default true"
    else:
        src = "set" if "norm_before_residual" in d.raw else "absent: vLLM-format default false"
    ignored = list(eff.ignored)
    if eff.mla and cfg.get("norm_before_fc"):
        ignored.append("norm_before_fc (the MLA drafter has none)")
    msg = f"norm_before_residual {str(nbr).lower()} ({src})"
    mla_fc_norm = eff.mla and cfg.get("fc_norm") and p.rules.fc_norm and not p.rules.mla_fc_norm
    if mla_fc_norm and not ignored:
        return defect(
            p,
            "mla_fc_norm",
            "norms",
            f"{msg}; vLLM {p.release}'s MLA drafter (Eagle3DeepseekV2) ignores fc_norm (its "
            "Llama drafter reads it), so the drafter runs without a norm it was trained with: "
            "drafts are silently wrong",
            f"serve on {p.fixed_in('mla_fc_norm')[0] or 'a later release'} or later, where the "
            "MLA drafter applies it",
            {},
        )
    if ignored:
        return Finding(
            "norms",
            "error",
            f"{msg}; vLLM {p.release} ignores {', '.join(ignored)}, so the drafter runs "
            "without a norm it was trained with: drafts are silently wrong",
        )
    return Finding("norms", "info", msg)


def check_rope(p: Pair) -> Finding:
    cfg, rel = p.cfg, p.release
    scaling = cfg.get("rope_scaling")
    theta = cfg.get("rope_theta")
    kind = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, dict) else None
    if not p.eff.mla:
        shown = "not set" if theta is None else theta
        return Finding("rope", "info", f"rope_theta {shown}, rope_scaling {kind or 'none'}")
    if scaling or not p.rules.mla_rope_without_theta:
        return Finding(
            "rope", "info", f"MLA drafter: rope_theta {theta}, rope_scaling {kind or 'none'}"
        )
    what = (
        f"the MLA drafter has no rope_scaling: vLLM {rel} rebuilds its rope without its "
        f"rope_theta ({theta}), so positions are encoded with the default 10000 (and under "
        "transformers 5 the load fails with KeyError 'factor')"
    )
    return defect(
        p,
        "mla_rope_theta",
        "rope",
        what,
        "give the drafter's config the rope_scaling it was trained with",
        {},
    )


def check_rope_range(p: Pair) -> Finding:
    """A YaRN drafter's rotary cache holds original_max_position_embeddings x
    factor positions (rotary_embedding/__init__.py get_rope: YaRN and DeepSeek
    YaRN build cos/sin for max_position x scaling_factor, max_position being
    the original; every release), whatever its max_position_embeddings says
    and whatever a release or patch raises that to. The proposer hands the
    drafter the target's positions and clamps them only at the target's
    max_model_len (EagleProposer / llm_base_proposer.py, self.max_model_len
    is the target's), so positions from the range on index past the cache."""
    rope = p.cfg.get("rope_scaling") or p.cfg.get("rope_parameters")
    kind = rope.get("rope_type", rope.get("type")) if isinstance(rope, dict) else None
    if kind not in ("yarn", "deepseek_yarn"):
        return Finding("rope_range", "info", "no YaRN rope: positions as in max_model_len")
    assert isinstance(rope, dict)
    orig, factor = rope.get("original_max_position_embeddings"), rope.get("factor")
    # within settings.MOST, each (NaN and inf are not): their product stays a
    # finite float, so the range is a number (1e308 x 4096 made int(inf) raise)
    if (
        not isinstance(orig, int)
        or not isinstance(factor, (int, float))
        or not 0 < orig <= settings.MOST
        or not 0 < factor <= settings.MOST
    ):
        return Finding(
            "rope_range",
            "warning",
            "YaRN rope without original_max_position_embeddings and factor: its range is not "
            "checked",
        )
    span = int(orig * factor)
    length, given = p.serve.max_model_len, True
    if length is None:
        length, given = p.target.max_position_embeddings, False
    src = "--max-model-len" if given else "vLLM's default, the target's max_position_embeddings"
    what = f"the drafter's YaRN rotary range is {span} positions ({orig} x {factor:g})"
    if length is None or length <= span:
        served = "" if length is None else f"; max_model_len {length} ({src}) within it"
        return Finding("rope_range", "info", what + served)
    return Finding(
        "rope_range",
        "warning",
        f"{what}, and vLLM {p.release} serves max_model_len {length} ({src}): the proposer "
        f"hands the drafter the target's positions, so from position {span} on its rotary "
        f"reads past its cos/sin cache ({span} rows): a device error, or drafts with a wrong "
        "rotation whose acceptance collapses on exactly the longest requests; serve with "
        f"--max-model-len {span}, or use a drafter trained for {length} positions",
    )
