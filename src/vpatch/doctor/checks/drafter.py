"""doctor's checks of how the release's vLLM builds the drafter: its format
and class, MLA detection, the norms it reads or ignores, and its rotary
embedding (rope_theta, the YaRN range)."""

from __future__ import annotations

from ... import settings
from ..pair import Pair
from ..report import Finding
from .vllm import defect


def check_format(p: Pair) -> Finding:
    d, eff = p.drafter, p.eff
    problems = list(d.problems) + list(eff.problems)
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
    mt = p.cfg.get("model_type")
    if not p.eff.mla:
        return Finding("mla_detection", "info", "not an MLA drafter")
    if mt == "kimi_k2" and p.rules.kimi_k2_drafter_not_mla:
        what = (
            f"model_type 'kimi_k2': vLLM {p.release} counts an EAGLE drafter as MLA only "
            "for model_type deepseek_v2/deepseek_v3 (ModelConfig.is_deepseek_mla), so it sets "
            "this MLA drafter up as a non-MLA model"
        )
        return defect(
            p,
            "kimi_k2_mla",
            "mla_detection",
            what,
            "declare model_type deepseek_v2 in the drafter's config (deepseek_v3 would make "
            "it an MTP head)",
            {},
        )
    return Finding("mla_detection", "info", f"MLA drafter (model_type {mt!r})")


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
