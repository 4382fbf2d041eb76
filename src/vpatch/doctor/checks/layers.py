"""doctor's checks of the aux layers: which ids vLLM feeds the drafter and
from where, whether the target yields a state for each (layer 0, the final
norm's input, out of range), whether they are the layers the drafter was
trained on (the two conventions: conventions.py), and pipeline parallelism
(the ids must be on the last rank)."""

from __future__ import annotations

import re

from packaging.version import Version

from .. import behaviour
from ..conventions import IDS_KEY, ints, written_ids
from ..defects import patched_eagle3, patched_layer0
from ..pair import Pair, show_ids
from ..report import Finding
from .models import aux_layers, check_pp_relay
from .vllm import defect

# where the acceptance figures the findings cite were measured (make bench-spec)
MEASURED_ON = "vLLM 0.32.0, the V1 and the V2 model runner alike"


def check_aux_layers(p: Pair) -> Finding:
    ids, source = p.ids()
    kept, dropped, refused = p.states()
    n, rel = p.n, p.release
    # which ids are read depends on the model runner (V2 ignores eagle_config's)
    head = (
        f"vLLM {rel} ({p.runner.upper()} model runner) feeds the drafter layers "
        f"{show_ids(ids)} (from {source})"
    )
    if p.method == "mtp":
        return Finding("aux_layers", "info", "MTP reads no aux states: no aux layers")
    if not p.use_aux:
        return Finding(
            "aux_layers",
            "info",
            "eagle_config.use_aux_hidden_state is false: the drafter takes the target's "
            "last hidden state, no aux layers",
        )
    if (unread := p.top_ids_unread) is not None:
        shown = str(unread)[:80]
        listed = [int(x) for x in re.findall(r"-?\d+", shown)] or ids
        return Finding(
            "aux_layers",
            "warning",
            f"{head}; {IDS_KEY} is {shown!r} ({type(unread).__name__}), "
            "not a list: vLLM takes ids from a list only, and, the key being set, none from "
            f"eagle_config either; write it as a list, e.g. {show_ids(listed)}",
        )
    if (family := aux_layers(p)) is not None:
        return family
    if refused:
        return Finding(
            "aux_layers",
            "error",
            f"{head}; {show_ids(refused)} are outside [0, {n}] and vpatch's {rel} series raises "
            f"ValueError when the model loads; use ids in [0, {n}] (id k is the input of "
            f"layer k, {n} the final norm's input)",
        )
    if dropped == [n]:
        what = (
            f"{head}; id {n} (the final norm's input) matches no layer of vLLM {rel}'s "
            "DeepseekV2Model.forward: the target returns no state for it, so the drafter's "
            "fc gets fewer states than it was built for and the first request fails"
        )
        fixed, pr = p.fixed_in("final_norm_id")
        workaround = f"vLLM {fixed} and later collect it{pr}" if fixed else f"upstream{pr}"
        return defect(p, "final_norm_id", "aux_layers", what, workaround, {})
    if dropped:
        fixed, _ = p.fixed_in("final_norm_id")
        fin = f"{n} (the final norm's input) only from {fixed or 'a later release'}, "
        fin = fin if n in dropped else ""
        return Finding(
            "aux_layers",
            "error",
            f"{head}; {show_ids(dropped)} match no layer: the target returns no state for them "
            f"({fin}valid ids here: 0..{n if p.final_norm_id else n - 1}), so the "
            "drafter's fc gets fewer states than it was built for and the first request "
            "fails; fix the ids in the drafter's config",
        )
    if 0 in kept and not p.series:
        carried = patched_layer0(p.pins)
        if not (rel in carried and p.ready):
            span = sorted(carried, key=Version)
            own = sorted(patched_eagle3(p.pins), key=Version)
            fix = (
                "`vpatch install` carries the fix for this release"
                if rel in carried
                else (f"vpatch carries the fix for {span[0]}-{span[-1]}; " if span else "")
                + (f"{own[0]}-{own[-1]} with vpatch's series handle layer 0 too" if own else "")
            )
            return Finding(
                "aux_layers",
                "error",
                f"{head}; layer 0 crashes vLLM {rel} on its first forward pass "
                f"(DeepseekV2Model.forward adds residual, still None, to the embeddings: "
                f"TypeError); {fix}",
            )
    notes = []
    if len(set(ids)) != len(ids):
        notes.append(f"duplicates give one state each ({len(kept)} states)")
    if list(ids) != sorted(ids):
        return Finding(
            "aux_layers",
            "warning",
            f"{head}; vLLM concatenates the states in layer order {show_ids(kept)}, not in the "
            "order written: if the drafter was trained in the written order its fc sees "
            f"them permuted (measured on the tier's tiny pair, {MEASURED_ON}: acceptance "
            "0.43 -> 0.36, docs/measurements.md); write the ids in ascending order",
        )
    meaning = (
        f"id k is the input of decoder layer k (the output of layer k - 1, 0 the embeddings, "
        f"{n} the final norm's input)"
    )
    return Finding("aux_layers", "warning" if notes else "info", "; ".join([head, meaning, *notes]))


def check_trained_layers(p: Pair) -> Finding:
    """Are the layers vLLM feeds the layers the drafter was trained on?"""
    if not p.use_aux:
        return Finding("trained_layers", "info", "no aux layers (use_aux_hidden_state false)")
    fed, source = p.ids()
    rel, rn = p.release, p.runner.upper()
    feeds = f"vLLM {rel} ({rn} model runner) feeds {show_ids(fed)} (from {source})"
    written = written_ids(p)
    if not written:
        return Finding(
            "trained_layers",
            "info",
            f"the drafter writes no aux layer ids; {feeds}: it must have been trained on "
            "the target's default layers",
        )
    main = written[0]
    said = []
    for w in written:
        terms = "" if w.convention == "vllm" else f" = {show_ids(w.layers)} in vLLM's terms"
        said.append(f"{w.key} {show_ids(w.ids)} ({w.why}){terms}")
    desc = "; ".join(said)
    others = [w for w in written[1:] if ints(w.layers) != ints(main.layers)]
    top = f"{IDS_KEY}: {show_ids(main.layers)}"
    settle = (
        "the first id cannot prove the convention: settle it by the training framework "
        "(SGLang, SpecForge: output of layer k; vLLM, speculators: input of layer k) or by "
        f"measuring acceptance with {IDS_KEY} {show_ids(main.layers)} and with {show_ids(main.ids)}"
    )
    if ints(fed) != ints(main.layers):
        one_off = ints(fed) == ints(main.ids) and main.convention == "output"
        how = (
            "every state one layer early (the input of the layer, not its output)"
            if one_off
            else "other layers than it was trained on"
        )
        msg = (
            f"{desc}; {feeds}: {how}, and acceptance drops without an error (measured on the "
            f"tier's tiny pair, {MEASURED_ON}, every id one layer off: 0.43 -> 0.41, its "
            f"states being worth 0.10 there, docs/measurements.md); write the top-level {top} "
            "(vLLM's convention, read by every release)"
        )
        if not main.certain and main.convention == "output":
            msg += f"; {settle}"
        return Finding("trained_layers", "error", msg)
    if others:
        return Finding(
            "trained_layers",
            "warning",
            f"{desc}; {feeds}, the layers {main.key} names; the other list disagrees: check "
            "which the drafter was trained on",
        )
    notes = []
    if main.key != IDS_KEY:
        deaf = unread_by(p, main.key)
        serving = p.runner.upper()
        elsewhere = [r for r in deaf if r != serving]
        where = (
            f"vLLM {rel}'s {serving} runner, which serves it, does not read them (it feeds the "
            "target's default layers, the same layers here)"
            if serving in deaf
            else f"vLLM {rel}'s {serving} runner, which serves it, reads them"
        )
        if elsewhere:
            where += f"; its {' and '.join(elsewhere)} runner does not"
        notes.append(
            f"ids only in {main.key}: {where}; the top-level {top} is read by every release"
        )
    if main.convention == "output":
        notes.append(settle)
    sev = "warning" if main.key != IDS_KEY and source.startswith("eagle_config") else "info"
    return Finding(
        "trained_layers",
        sev,
        "; ".join([f"{desc}; {feeds}: the layers it was trained on", *notes]),
    )


def unread_by(p: Pair, key: str) -> list[str]:
    """The release's model runners ("V1", "V2") that do not read the nested
    ids under `key` ("eagle_config.<name>")."""
    name = key.removeprefix("eagle_config.")
    reads = {
        "v1": p.rules.v1_reads_nested_ids and name == IDS_KEY,
        "v2": bool(p.rules.v2_nested_key) and name == p.rules.v2_nested_key,
    }
    return sorted(r.upper() for r in p.rules.runners if not reads.get(r, False))


def check_pipeline_parallel(p: Pair) -> Finding:
    pp, n, rel = p.serve.pipeline_parallel_size, p.n, p.release
    if pp == 1:
        return Finding("pipeline_parallel", "info", "no pipeline parallelism")
    if pp > n:
        return Finding("pipeline_parallel", "error", f"PP {pp} > the target's {n} layers")
    try:
        start, _ = behaviour.pp_indices(n, pp - 1, pp, p.environ)
    except ValueError as e:
        return Finding("pipeline_parallel", "error", str(e))
    kept, _, _ = p.states()
    ids, _ = p.ids()
    off = [i for i in kept if i < start]
    own = f"the last PP rank owns layers {start}..{n - 1} (and {n})"
    no_pp = {"pipeline_parallel_size": 1, "tensor_parallel_size": p.serve.tensor_parallel_size * pp}
    if (relayed := check_pp_relay(p)) is not None:
        return relayed
    if p.use_aux and p.runner == "v2" and p.rules.v2_supports_pp:
        return Finding(
            "pipeline_parallel",
            "error",
            f"vLLM {rel} (V2 model runner) refuses EAGLE-3 with pipeline parallelism for "
            f"{p.target.architecture}: it cannot relay aux states between ranks; serve "
            f"with --tensor-parallel-size {p.serve.tensor_parallel_size * pp} and no PP",
            no_pp,
        )
    if p.use_aux and off:
        what = (
            f"vpatch's {rel} series raises ValueError at load"
            if p.series
            else "vLLM drops them (aux states never cross PP ranks), the fc gets fewer "
            "states and the first request fails"
        )
        return Finding(
            "pipeline_parallel",
            "error",
            f"PP {pp}: {own}, but the drafter needs {show_ids(off)}: {what}; serve without PP "
            f"(e.g. --tensor-parallel-size {p.serve.tensor_parallel_size * pp})",
            no_pp,
        )
    return Finding("pipeline_parallel", "info", f"PP {pp}: {own}; every aux layer is there")
