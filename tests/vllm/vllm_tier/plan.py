"""Which checks run on which releases: for a selection of releases, each
check's releases (those it applies to), or why none of them.

A check is one verdict per release, made from one or more inner runs: the
tier program (tests/vllm/tier.py) builds and runs what the plan asks for,
and test_releases.py has one outer test per check (``test_<check>``),
parametrized by the same plan."""

from __future__ import annotations

from packaging.version import Version

from . import TIER, releases, upstream

# Fixture series that must FAIL under the CUDA contract: layer-0 fixes whose aux
# state is the embedding tensor itself (series/<release>-aliasing).
ALIASING = {d.name.removesuffix("-aliasing"): d for d in (TIER / "series").glob("*-aliasing")}

CHECKS = (
    "patch_effects",
    "served_speculative_decoding",
    "served_kimi_k25_wrapper",
    "served_at_tensor_parallel_2",
    "series_cut_short",
    "doctor_names_the_served_layers",
    "doctor_mla_drafters_served",
    "fixes_no_selected_release_carries",
    "cuda_contract_catches_an_aliasing_layer0_fix",
    "series_own_tests_under_the_cuda_contract",
    "upstream_tests_on_patched_tree",
)


# The served checks are the tier's costliest runs (two engines an install, the
# unpatched one stopping early). In the default set (VLLM unset: what CI runs)
# each runs only where it proves something new (default_served); a release
# chosen with VLLM= runs every one it can.
def default_served() -> dict[str, tuple[str, ...]]:
    """{served check: its releases in the default set}.

    served_speculative_decoding: where vLLM's CPU runner serves by itself,
    and of the releases served through the stand-ins those at the ends of
    the span whose series carries EAGLE-3, the newest of its first and of
    its last minor (0.15.x and 0.17.x: they meet both texts of the
    unpatched refusal, release/unpatched.py's EAGLE3_REFUSED; the other
    stood-in releases are left out for CI's budget). The Kimi-K2.5 wrapper
    on the newest release whose series carries its EAGLE-3 support, and on
    the newest release; tensor parallel 2 on the newest."""
    default = releases.default()
    eagle3 = [r for r in default if releases.has_eagle3_series(r)]
    ends = {_newest_of_its_minor(eagle3, r) for r in (eagle3[:1] + eagle3[-1:])}
    native = [r for r in default if releases.serves_eagle3_natively(r)]
    newest = default[-1:]
    return {
        "served_speculative_decoding": tuple(r for r in default if r in {*ends, *native}),
        "served_kimi_k25_wrapper": (*eagle3[-1:], *newest),
        "served_at_tensor_parallel_2": newest,
    }


def _newest_of_its_minor(among: list[str], release: str) -> str:
    """The newest of ``among`` (oldest first) in ``release``'s minor line."""
    return [r for r in among if Version(r).release[:2] == Version(release).release[:2]][-1]


def _default(selected: list[str]) -> bool:
    """The default set is selected (VLLM unset, or naming exactly it)."""
    return list(selected) == list(releases.default())


def _adds_vllm_tests(release: str) -> bool:
    sdir = releases.series_dir(release)
    return sdir is not None and bool(upstream.series_tests(sdir))


def releases_of(check: str, selected: list[str]) -> list[str]:
    """The releases ``check`` runs on, for the ``selected`` ones."""
    if check == "patch_effects":
        return list(selected)
    if check in default_served():
        served = [r for r in selected if releases.serves_eagle3(r)]
        return [r for r in served if r in default_served()[check]] if _default(selected) else served
    if check == "series_cut_short":
        return [r for r in selected if r in releases.CUT_SHORT]
    if check == "doctor_names_the_served_layers":
        # not tried through the stand-ins: doctor reads the layers an engine
        # asks for, which the stand-ins do not touch
        return [r for r in selected if releases.serves_eagle3_natively(r)]
    if check == "doctor_mla_drafters_served":
        return [r for r in selected if releases.serves_mla(r)]
    if check == "fixes_no_selected_release_carries":
        # the newest release that carries a fix no selected release carries
        return sorted(releases.fix_releases(selected), key=Version)
    if check == "cuda_contract_catches_an_aliasing_layer0_fix":
        return [r for r in selected if r in ALIASING]
    if check == "series_own_tests_under_the_cuda_contract":
        return [r for r in selected if _adds_vllm_tests(r)]
    if check == "upstream_tests_on_patched_tree":
        # vLLM's registry tests where the series adds EAGLE-3 (0.15-0.17: new
        # interfaces and imports in several model files). A layer-0-only
        # series changes one expression that the inner suite runs for real,
        # and brings its own vLLM test (series_own_tests_under_the_cuda_contract).
        return [r for r in selected if releases.has_eagle3_series(r)]
    raise ValueError(f"no check {check!r}")


def why_none(check: str, selected: list[str]) -> str:
    """Why ``check`` runs on none of the ``selected`` releases."""
    return {
        "patch_effects": "no release selected",
        **{
            check: f"no selected release runs it (default set: {', '.join(defaults)}; "
            "VLLM=X: wherever EAGLE-3 is served on CPU)"
            + "".join(f"; {r}: {releases.no_eagle3_on_cpu(r)}" for r in _unserved(selected))
            for check, defaults in default_served().items()
        },
        "series_cut_short": "no selected release has a series cut short (releases.CUT_SHORT: "
        f"{', '.join(releases.CUT_SHORT)})",
        "doctor_names_the_served_layers": "no selected release where vLLM's CPU runner serves "
        "EAGLE-3 by itself (not tried through the stand-ins, release/stand_ins.py)",
        "doctor_mla_drafters_served": "no selected release serves EAGLE-3 with MLA attention "
        f"on CPU by itself (MLA from {releases.MLA_ON_CPU_FROM}; release/stand_ins.py)",
        "fixes_no_selected_release_carries": "every marker of patches.toml is carried "
        "by a selected release",
        "cuda_contract_catches_an_aliasing_layer0_fix": "no selected release has an aliasing "
        f"layer-0 fixture series ({', '.join(ALIASING)})",
        "series_own_tests_under_the_cuda_contract": "no selected release's series adds a test "
        "to vLLM's own test tree",
        "upstream_tests_on_patched_tree": "vLLM's registry tests run only for releases whose "
        "series adds EAGLE-3 (0.15-0.17)",
    }[check]


def _unserved(selected: list[str]) -> list[str]:
    return [r for r in selected if not releases.serves_eagle3(r)]


def plan(selected: list[str]) -> dict[str, list[str]]:
    """{release: [checks]}: the selected releases first, in their order,
    then any other a check runs on (fixes_no_selected_release_carries)."""
    out: dict[str, list[str]] = {r: [] for r in selected}
    for check in CHECKS:
        for release in releases_of(check, selected):
            out.setdefault(release, []).append(check)
    return {r: checks for r, checks in out.items() if checks}
