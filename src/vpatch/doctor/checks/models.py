"""doctor's checks of the code that serves the target (serving.toml, through
doctor/served.py): which file and class the release's registry and platform
dispatch pick on the platform, whether the release takes the method for
that target at all (config/speculative.py's EAGLE-3 allowlist where the
release has one, SupportsEagle3, a DSpark class for the family), the states
taken before the TP all-reduce, and the variables that change what an aux
state is. The aux ids of these files
are check_aux_layers' (aux_layers() below), their PP relay
check_pipeline_parallel's."""

from __future__ import annotations

from packaging.version import Version

from .. import behaviour
from ..pair import Pair, show_ids
from ..report import Finding
from ..served import AUX_METHODS, NOT_CHECKED, PLATFORM_NAMES, platform_of, sequence_parallel
from .vllm import defect

# What an aux-state variable's values mean, and the text-config key without
# which it changes nothing (vllm/envs.py's comments; the release and the file
# that read it are serving.toml's aux_env)
STREAMS: dict[str, tuple[dict[bool, str], str]] = {
    # envs.py: "Tap the pre-norm AttnRes mixture, rather than the post-mixture
    # sum, as the auxiliary hidden state handed to a DFlash drafter"
    # (`bool(int(os.getenv(NAME, "0")))`); kimi_k3/nvidia/model.py
    # _capture_aux_hidden_stream: the mixture "is what the DFlash drafters were
    # trained against"
    "VLLM_KIMI_K3_AUX_ATTN_RES_STREAM": (
        {False: "the prefix sum (prefix_only)", True: "the pre-norm AttnRes mixture"},
        "attn_res_block_size",
    ),
}


def _where(p: Pair) -> str:
    plat, why = p.platform
    return f"vLLM {p.release} on {PLATFORM_NAMES.get(plat, plat)} ({why})"


def admitted(allowlist: frozenset[str], model_type: str) -> bool:
    """config/speculative.py SpeculativeConfig._verify_args: the allowlist
    takes a target whose hf_text_config.model_type contains one of its
    entries (no list: every target)."""
    return not allowlist or any(a in model_type for a in allowlist)


def first_serving(p: Pair) -> str | None:
    """The first release after this one that serves the target with the
    method on this platform: registered, admitted by its allowlist, and its
    class a SupportsEagle3 (for a target deepseek_v2.py serves, rules.toml's
    upstream_eagle3)."""
    plat = p.platform[0]
    for v in behaviour.known_releases(p.pins):
        if Version(v) <= Version(p.release):
            continue
        s = p.pins.serving.served(p.target.architecture, v, plat)
        if s is None or not s.registered:
            continue
        takes = s.code.eagle3 if s.code is not None else p.pins.rules.at(v).upstream_eagle3
        if takes and admitted(s.facts.allowlist, p.target.text_model_type):
            return v
    return None


def _then(p: Pair) -> str:
    v = first_serving(p)
    return f"vLLM {v} is the first release that serves it" if v else "no pinned release serves it"


def kinds(p: Pair) -> list[str]:
    """The drafter kinds the release builds for the target (registry.py and
    the served class)."""
    s = p.served
    if s is None or s.code is None:
        return []
    names = sorted(s.family.drafters_at(p.release))
    out = ["EAGLE-3", "DFlash"] if s.code.eagle3 else []
    dspark = [n for n in names if "DSpark" in n]
    mtp = [n for n in names if "MTP" in n]
    if dspark:
        out.append(f"DSpark ({', '.join(dspark)})")
    if mtp:
        out.append(f"MTP ({', '.join(mtp)})")
    return out


def _differs(p: Pair) -> str:
    """One line: where ROCm's serving code differs from CUDA's."""
    if p.platform[0] != "cuda" or p.served is None:
        return ""
    rocm = p.pins.serving.served(p.target.architecture, p.release, "rocm")
    mine = p.served
    if rocm is None or rocm.path == mine.path:
        return ""
    if not rocm.registered:
        return f"on ROCm vLLM {p.release} does not register {p.target.architecture}"
    if rocm.code is None:
        return f"on ROCm vLLM {p.release} serves it with {rocm.path} (doctor's DeepSeek-V3 rules)"
    a, b = mine.code, rocm.code
    said = []
    if a is None or a.id0 != b.id0:
        said.append(f"id 0 {ID0_SAID[b.id0]}")
    if a is None or a.id_n != b.id_n:
        said.append("id n " + ("captured" if b.id_n else "never captured"))
    if a is None or a.partial_sum != b.partial_sum:
        said.append("states taken " + ("before" if b.partial_sum else "after") + " the all-reduce")
    if a is None or a.pp_relay != b.pp_relay:
        said.append("aux states " + ("relayed" if b.pp_relay else "not relayed") + " across PP")
    if a is None or a.eagle3 != b.eagle3:
        said.append("SupportsEagle3" if b.eagle3 else "no SupportsEagle3")
    if a is None or a.aux_env != b.aux_env:
        said.append(f"reads {b.aux_env}" if b.aux_env else "reads no aux-state variable")
    return f"on ROCm it is {rocm.path}: {', '.join(said)}" if said else ""


ID0_SAID = {
    "embedding": "the embedding",
    "typeerror": "a TypeError (hidden_states + None)",
    "dropped": "never captured",
}


def check_serving(p: Pair) -> Finding:
    s, t, rel, method = p.served, p.target, p.release, p.method
    if s is None:
        known = t.family != "other"
        return Finding(
            "serving",
            "info",
            f"{t.architecture}: served by model_executor/models/deepseek_v2.py in every release "
            "(doctor's DeepSeek-V2/V3 rules)"
            if known
            else f"{t.architecture}: not one of the architectures whose serving code doctor reads",
        )
    where = _where(p)
    if not s.registered:
        since = s.since
        later = (
            f"vLLM {since} and later register it"
            if since and Version(since) > Version(rel)
            else "no pinned release registers it"
        )
        return Finding(
            "serving",
            "error",
            f"{where} does not register {t.architecture} (model_executor/models/registry.py): "
            f"the target fails to load; {later}",
        )
    head = f"{where} serves {t.architecture} ({s.family.name}) with {s.path} ({s.cls})"
    model_type = t.text_model_type
    if (
        method in ("eagle3", "dflash")
        and not p.series
        and not admitted(s.facts.allowlist, model_type)
    ):
        listed = ", ".join(sorted(s.facts.allowlist))
        return Finding(
            "serving",
            "error",
            f"{head}; SpeculativeConfig refuses {method} for model type {model_type!r} before "
            f"anything loads ('{method} is only supported for [{listed}] models': "
            f"config/speculative.py, a substring match); {_then(p)}",
        )
    code = s.code
    if method in AUX_METHODS and code is not None and not code.eagle3:
        return Finding(
            "serving",
            "error",
            f"{head}; {s.cls} there is no SupportsEagle3: vLLM loads the target and the "
            "drafter, then refuses the pair ('Model does not support EAGLE3 interface': "
            "v1/worker/gpu_model_runner.py GPUModelRunner.load_model, the V2 runner's "
            f"eagle3_utils.py); {_then(p)}",
        )
    if method == "dspark" and code is not None:
        dspark = sorted(n for n in s.family.drafters_at(rel) if "DSpark" in n)
        if not dspark:
            return Finding(
                "serving",
                "error",
                f"{head}; vLLM {rel} registers no DSpark drafter class for {s.family.name} "
                "(registry.py _SPECULATIVE_DECODING_MODELS): the drafter does not load",
            )
    said = [head]
    if code is not None:
        said.append(
            "SupportsEagle3; builds for this target: " + (", ".join(kinds(p)) or "no drafter")
        )
    else:
        said.append("doctor's DeepSeek-V2/V3 rules (rules.toml) apply to that file")
    if s.family.note and method in AUX_METHODS:
        said.append(s.family.note)
    if differs := _differs(p):
        said.append(differs)
    if method in NOT_CHECKED:
        said.append(f"for {method}, {NOT_CHECKED[method]}")
    return Finding("serving", "info", "; ".join(said))


def aux_layers(p: Pair) -> Finding | None:
    """check_aux_layers for a target a file of serving.toml serves (None for
    deepseek_v2.py's targets): ids 0 and n as that file captures them, a
    defect vpatch's series fixes reported by defect()."""
    s, code = p.served, p.code
    if s is not None and (not s.registered or (s.code is not None and not s.code.eagle3)):
        return Finding(
            "aux_layers",
            "info",
            f"not checked: vLLM {p.release} does not serve {p.target.architecture} with EAGLE-3 "
            "here (the serving check says what it does)",
        )
    if s is None or s.code is None or code is None:
        return None
    raw, n, rel = s.code, p.n, p.release
    ids, source = p.ids()
    kept, dropped, _ = p.states()
    head = (
        f"vLLM {rel} ({p.runner.upper()} model runner) feeds the drafter layers "
        f"{show_ids(ids)} (from {source})"
    )
    capture = f"{s.capture_file}'s {s.capture_cls}.forward"
    notes: list[str] = []
    checks: list[tuple[bool, str, str, str]] = [
        (
            0 in ids and raw.id0 == "typeerror",
            "id0",
            f"{head}; layer 0 crashes vLLM {rel} on its first forward pass ({capture} adds the "
            "residual, still None, to the embedding: TypeError)",
            "drop id 0 from the drafter's ids, if it was not trained on the embedding",
        ),
        (
            0 in ids and raw.id0 == "dropped",
            "id0",
            f"{head}; id 0 (the embedding) is never captured: {capture} captures the stream "
            "entering layer k for k >= 1 only (nothing before layer 0), so the target returns "
            "one state fewer than the drafter's fc was built for and the first request fails",
            "no workaround: the drafter was trained on the embedding",
        ),
        (
            n in ids and not raw.id_n,
            "id_n",
            f"{head}; id {n} (the final norm's input) is never captured: {capture} takes each "
            "state before a layer and has no end-layer capture, so the drafter's fc gets one "
            "state fewer than it was built for and the first request fails",
            "no workaround: the drafter was trained on that state",
        ),
    ]
    for bad, fact, what, workaround in checks:
        if not bad:
            continue
        key = s.family.fixes.get(fact)
        if key is None:
            return Finding("aux_layers", "error", what)
        f = defect(p, key, "aux_layers", what, workaround, {})
        if f.severity == "error":
            return f
        notes.append("as released, " + f.message.removeprefix(f"{head}; "))
    out = [i for i in dropped if not (i == 0 and raw.id0 != "embedding") and i != n]
    if out:
        return Finding(
            "aux_layers",
            "error",
            f"{head}; {show_ids(out)} match no layer of the {n}-layer target: it returns no "
            "state for them, so the drafter's fc gets fewer states than it was built for and "
            "the first request fails; fix the ids in the drafter's config",
        )
    sort = (
        f"; {s.capture_cls} is an EagleModelMixin: vLLM {rel} sorts and dedups the ids"
        if code.mixin and s.facts.mixin_sorts
        else ""
    )
    if len(set(ids)) != len(ids):
        notes.append(f"duplicates give one state each ({len(kept)} states){sort}")
    elif list(ids) != sorted(ids):
        return Finding(
            "aux_layers",
            "warning",
            f"{head}; vLLM concatenates the states in layer order {show_ids(kept)}, not in the "
            "order written: if the drafter was trained in the written order its fc sees them "
            f"permuted; write the ids in ascending order{sort}",
        )
    zero = "0 the embedding" if code.id0 == "embedding" else "0 never captured"
    last = f"{n} the final norm's input" if code.id_n else f"{n} never captured"
    meaning = f"id k is the input of decoder layer k in {capture} ({zero}, {last})"
    sev = "warning" if any(x.startswith("duplicates") for x in notes) else "info"
    return Finding("aux_layers", sev, "; ".join([head, meaning, *notes]))


def check_tp_capture(p: Pair) -> Finding:
    s, tp, rel = p.served, p.serve.tensor_parallel_size, p.release
    if s is None or s.code is None:
        return Finding(
            "tp_capture", "info", "no serving-file facts for this target: not checked here"
        )
    if not p.use_aux or p.method not in AUX_METHODS:
        return Finding("tp_capture", "info", f"the {p.method} drafter reads no aux states")
    if not s.code.partial_sum:
        return Finding(
            "tp_capture",
            "info",
            f"{s.capture_file} takes no aux state before a TP all-reduce it defers to the next "
            "layer (fused_allreduce_rms_norm)",
        )
    if tp == 1:
        return Finding("tp_capture", "info", "TP 1: the aux states are whole (no all-reduce)")
    sp, missing = sequence_parallel(p.serve.other, tp, p.serve.pipeline_parallel_size)
    if sp:
        return Finding(
            "tp_capture",
            "info",
            f"TP {tp} with sequence parallelism: {s.capture_file} gathers the aux states "
            "whole (sp_all_gather)",
        )
    what = (
        f"vLLM {rel}'s {s.capture_file} takes each aux state before the TP all-reduce its "
        "decoder layers fuse into the next layer's norm (MLP/MoE reduce_results=False, "
        f"fused_allreduce_rms_norm): at TP {tp} without sequence parallelism (it needs "
        f"{missing}) every id >= 1 is this rank's partial sum, and acceptance drops with no "
        "error"
    )
    workaround = (
        "serve with sequence parallelism (--enable-expert-parallel, --data-parallel-size > 1, "
        "TP > 1, PP 1), or at TP 1"
    )
    key = s.family.fixes.get("partial_sum")
    if key is None:
        return Finding("tp_capture", "error", f"{what}; {workaround}")
    return defect(p, key, "tp_capture", what, workaround, {})


def _stream(value: str) -> bool | None:
    """vLLM's `bool(int(value))`; None where int() fails (vLLM's error)."""
    try:
        return bool(int(value))
    except ValueError:
        return None


def check_aux_stream(p: Pair) -> Finding:
    s, rel, t = p.served, p.release, p.target
    if s is None or s.code is None or not p.use_aux or p.method not in AUX_METHODS:
        return Finding("aux_stream", "info", "no variable changes the aux states here")
    said: list[str] = []
    for item in filter(None, s.code.aux_env.split(",")):
        name, _, default = item.partition("=")
        meaning, key = STREAMS.get(name, ({}, ""))
        if key and t.text.get(key) is None:
            said.append(f"{name} changes nothing without {key}")
            continue
        value = p.environ.get(name, default)
        on = _stream(value)
        if on is None:
            return Finding(
                "aux_stream",
                "error",
                f"{name}={value}: vLLM {rel} reads it as int() and fails at startup; give 0 or 1",
                {"unset": (name,)},
            )
        set_by = "set" if name in p.environ else "its default"
        fed = meaning.get(on, f"{name}={value}")
        return Finding(
            "aux_stream",
            "warning",
            f"{t.architecture} with {key} {t.text.get(key)}: vLLM {rel}'s {s.capture_file} "
            f"hands the drafter {fed} as each aux state ({name}={value}, {set_by}); the other "
            f"stream is {meaning.get(not on, '?')}. vLLM's source says its DFlash drafters "
            "were trained on the mixture (1); a drafter trained on the other stream drafts "
            "worse with no error, and its config does not say which: set "
            f"{name} to the stream it was trained on",
        )
    chooses = _chooses(p)
    if chooses:
        name, key, since = chooses
        return Finding(
            "aux_stream",
            "warning",
            f"{t.architecture} with {key} {t.text[key]}: vLLM {rel}'s {s.capture_file} hands "
            f"the drafter {STREAMS[name][0][False]} as each aux state and no variable chooses "
            f"{STREAMS[name][0][True]} ({name}: {since}); a drafter trained on that drafts "
            "worse with no error",
        )
    return Finding("aux_stream", "info", "; ".join(said) or "no variable changes the aux states")


def _chooses(p: Pair) -> tuple[str, str, str] | None:
    """(variable, config key, where it is read) for a target whose config has
    the key of a STREAMS variable that another file of its family, or a later
    release, reads and this one does not."""
    s, t = p.served, p.target
    assert s is not None
    t_files = p.pins.serving.files
    for path, entry in t_files.items():
        if entry.family != s.family.key:
            continue
        for name, (_, key) in STREAMS.items():
            if t.text.get(key) is None:
                continue
            since = p.pins.serving.first_where(
                path, lambda c, name=name: c is not None and name in c.aux_env
            )
            if since is not None:
                return name, key, f"{path} reads it from {since}"
    return None


def check_pp_relay(p: Pair) -> Finding | None:
    """check_pipeline_parallel for a serving file that relays aux states
    across PP ranks (None where it does not: the generic rules then)."""
    code = p.code
    if code is None or not code.pp_relay or p.serve.pipeline_parallel_size == 1:
        return None
    if not p.use_aux or p.runner != "v2":
        return None
    s = p.served
    assert s is not None
    return Finding(
        "pipeline_parallel",
        "info",
        f"PP {p.serve.pipeline_parallel_size}: vLLM {p.release}'s {s.capture_file} relays aux "
        f"states across PP ranks ({s.capture_cls}.supports_aux_hidden_states_over_pp): "
        "every aux layer reaches the drafter",
    )


METHOD_CHECKS = frozenset(
    {
        "check_vllm",
        "check_target",
        "check_serving",
        "check_serve_flags",
        "check_model_runner",
        "check_speculative_config",
        "check_aux_layers",
        "check_tp_capture",
        "check_aux_stream",
        "check_pipeline_parallel",
    }
)


def runs(p: Pair, name: str) -> bool:
    """Whether check `name` applies to the pair's method: every check for
    eagle3; for a DFlash, DSpark or MTP drafter of a serving.toml target,
    those of METHOD_CHECKS (check_serving says what is not checked)."""
    return p.method == "eagle3" or p.served is None or name in METHOD_CHECKS


def platform_said(dist: str | None, version: str | None, given: str) -> str:
    """The platform line of the report's header."""
    plat, why = platform_of(dist, version, given)
    return f"{PLATFORM_NAMES.get(plat, plat)} ({why})"
