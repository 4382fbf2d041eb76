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
    "doctor_names_the_served_layers",
    "doctor_mla_drafters_served",
    "fixes_no_selected_release_carries",
    "cuda_contract_catches_an_aliasing_layer0_fix",
    "series_own_tests_under_the_cuda_contract",
    "upstream_tests_on_patched_tree",
)


def _adds_vllm_tests(release: str) -> bool:
    sdir = releases.series_dir(release)
    return sdir is not None and bool(upstream.series_tests(sdir))


def releases_of(check: str, selected: list[str]) -> list[str]:
    """The releases ``check`` runs on, for the ``selected`` ones."""
    if check == "patch_effects":
        return list(selected)
    if check in ("served_speculative_decoding", "doctor_names_the_served_layers"):
        return [r for r in selected if releases.serves_eagle3(r)]
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
        "served_speculative_decoding": "no selected release serves EAGLE-3 on CPU "
        "(test_gpu.py only): "
        + "; ".join(f"{r}: {releases.no_eagle3_on_cpu(r)}" for r in selected),
        "doctor_names_the_served_layers": "no selected release serves EAGLE-3 on CPU",
        "doctor_mla_drafters_served": "no selected release serves EAGLE-3 with MLA attention "
        f"on CPU (MLA from {releases.MLA_ON_CPU_FROM}, where EAGLE-3 is served: "
        "releases.NO_EAGLE3_ON_CPU)",
        "fixes_no_selected_release_carries": "every marker of patches.toml is carried "
        "by a selected release",
        "cuda_contract_catches_an_aliasing_layer0_fix": "no selected release has an aliasing "
        f"layer-0 fixture series ({', '.join(ALIASING)})",
        "series_own_tests_under_the_cuda_contract": "no selected release's series adds a test "
        "to vLLM's own test tree",
        "upstream_tests_on_patched_tree": "vLLM's registry tests run only for releases whose "
        "series adds EAGLE-3 (0.15-0.17)",
    }[check]


def plan(selected: list[str]) -> dict[str, list[str]]:
    """{release: [checks]}: the selected releases first, in their order,
    then any other a check runs on (fixes_no_selected_release_carries)."""
    out: dict[str, list[str]] = {r: [] for r in selected}
    for check in CHECKS:
        for release in releases_of(check, selected):
            out.setdefault(release, []).append(check)
    return {r: checks for r, checks in out.items() if checks}
