"""`vpatch matrix`: how every patch of the patch set fares on each release.

The patches are the patch set's, each once, as the newest release that
carries it has it (its newest variant, named as in that release's series),
in the order of patches.toml's tables, which is every series' order. A
status per (release, patch), the patches applied in that order: `upstream`
when the patch's probe (probes.py) finds the behaviour in the release's own
source; `included` when it finds it once the patches before it are applied
(a patched series' first patch brings the layer-0 fix); `gone` when
patches.toml says upstream removed the code it changes by this release
(its `gone`) and no anchor of its probe is in the release (as `vpatch
check` counts it: env/readiness.py); otherwise `clean`,
`offset` (at moved lines), `fuzz` (only with context reduced to one line,
like `patch`'s default fuzz 2) or `conflict`. And per release, whether its
own series applies as `vpatch apply` applies it (`applies`, `fails`, or
`none` without a series).

Only the few files the patches and probes read are taken from each release,
as member reads from the cached sdist or wheel, and kept under
<cache>/files/<artifact sha256>/ so that warm runs never open an archive.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import gitutil, lock, probes, quilt
from ..shown import Shown
from ..sources.cache import Say, quiet
from ..sources.files import release_files
from ..sources.refresh import resolve

LEGEND = (
    "clean: applies as is; offset: applies at moved lines; fuzz: applies only with "
    "less context; conflict: does not apply; upstream: the release already has it; "
    "included: a patch before it brings it; gone: upstream removed the code it changes. "
    "series: the release's own series applies as `vpatch apply` applies it (applies / fails / "
    "none)"
)
_OFFSET = re.compile(r"Hunk #\d+ succeeded at \d+ \(offset")
_REDUCED = re.compile(r"Context reduced to")


def every_patch(pins: lock.Lock) -> list[tuple[str, quilt.Patch]]:
    """(release, patch) of every patch of the patch set, as the newest pinned
    release that carries it has it, in the tables' order. Only those files
    are read (not every release's series)."""
    ps = pins.patchset
    return [(v, ps.patch(var, name)) for v, name, var in ps.newest(pins.versions())]


# -- one release ---------------------------------------------------------------


def try_patch(tree: Path, patch: Path) -> str:
    """clean / offset / fuzz / conflict; the patch stays applied unless it conflicts."""
    ok, report = gitutil.apply_folder(tree, patch, context=1)
    if not ok:
        return "conflict"
    if _REDUCED.search(report):
        return "fuzz"
    return "offset" if _OFFSET.search(report) else "clean"


def classify(
    tree: Path,
    patches: list[quilt.Patch],
    checks: probes.Probes,
    files: Path | None = None,
    removed: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """The status of each patch on the release files in tree (which this
    changes: the patches are applied in order). Probes read `files`, the
    pristine copy, when given, else tree before anything is applied; then
    the tree as the earlier patches left it (`included`). `removed`: the
    slugs patches.toml says are gone by this release."""
    globs = probes.patterns(checks)
    pristine = probes.folder_files(files or tree, globs)
    out = {}
    for p in patches:
        mine = checks.get(p.slug, [])
        if p.slug in removed and probes.gone(mine, pristine):
            out[p.stem] = "gone"
        elif probes.holds(mine, pristine):
            out[p.stem] = "upstream"
        elif out and probes.holds(mine, probes.folder_files(tree, globs)):
            out[p.stem] = "included"
        else:
            out[p.stem] = try_patch(tree, p.path)
    return out


def own_series(tree: Path, patches: list[quilt.Patch]) -> str:
    """Whether a series applies to the release files in tree as `git am`
    applies it: full context, offsets allowed, in order."""
    if not patches:
        return "none"
    for p in patches:
        if not gitutil.apply_folder(tree, p.path, context=3)[0]:
            return "fails"
    return "applies"


# a patch as a worker process gets it: (its file, its name in the series)
Named = tuple[Path, str]


def _row(
    release: lock.Release,
    patches: list[Named],
    own: list[Named],
    checks: probes.Probes,
    offline: bool,
    removed: frozenset[str] = frozenset(),
) -> tuple[str, dict[str, str], str]:
    series = [quilt.parse(path, name) for path, name in patches]
    mine = [quilt.parse(path, name) for path, name in own]
    globs = {f for p in [*series, *mine] for f in p.files} | probes.patterns(checks)
    cached = release_files(release, globs, offline)
    with tempfile.TemporaryDirectory(prefix="vpatch-matrix-") as tmp:
        tree, clean = Path(tmp) / "tree", Path(tmp) / "own"
        shutil.copytree(cached, tree)
        shutil.copytree(cached, clean)
        return (
            release.version,
            classify(tree, series, checks, files=cached, removed=removed),
            own_series(clean, mine),
        )


# -- the matrix ------------------------------------------------------------------


@dataclass
class Matrix(Shown):
    source: dict[str, str]  # patch stem -> the series it was taken from
    patches: list[str]  # stems, in order
    releases: dict[str, dict[str, str]]
    pinned: dict[str, str]  # release -> its lock status, or "unpinned"
    series: dict[str, str]  # release -> whether its own series applies

    def to_json(self) -> dict[str, Any]:
        return {"releases": self.releases, "series": self.series}

    def lines(self) -> list[str]:
        """The matrix as markdown: a table, the patches' labels, the legend."""
        labels = [f"P{i}" for i in range(1, len(self.patches) + 1)]
        head = ["release", "lock", "series", "needs", *labels]
        rows = []
        for v, row in self.releases.items():
            needs = sum(s not in ("upstream", "included", "gone") for s in row.values())
            status = [row[p] for p in self.patches]
            rows.append([v, self.pinned[v], self.series[v], f"{needs}/{len(row)}", *status])
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

        def line(cells: list[str]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)) + " |"

        out = ["Every patch on each release", "", line(head)]
        out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        out += [line(r) for r in rows]
        out.append("")
        out += [
            f"- {lb}: {p} ({self.source[p]})" for lb, p in zip(labels, self.patches, strict=True)
        ]
        out += ["", LEGEND]
        return out


def build(
    versions: list[str] | None = None,
    *,
    pins: lock.Lock,
    series_dir: Path | None = None,
    meta_path: Path | None = None,
    offline: bool = False,
    jobs: int | None = None,
    say: Say = quiet,
) -> Matrix:
    """The matrix over `versions` (default: every pinned release) for every
    patch of every series (or, with series_dir, the patches of that one)."""
    checks = probes.load(meta_path or pins.patchset)
    if series_dir is not None:
        found = [(_shown(Path(series_dir), pins.root), p) for p in quilt.load(series_dir).patches]
    else:
        found = every_patch(pins)
    names = [p.stem for _, p in found]
    paths = [(p.path, p.name) for _, p in found]
    rels = [resolve(pins, v, offline) for v in versions] if versions else None
    rels = rels or [pins.releases[v] for v in pins.versions()]
    rels = sorted({r.version: r for r in rels}.values(), key=lambda r: r.key)
    ps = pins.patchset  # each release's own series, by name (the workers read them)
    own = {r.version: [(ps.path(v), n) for n, v in ps.named(r.version)] for r in rels}
    gone = {r.version: ps.gone(r.version) for r in rels}
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(rels)))
    say(f"matrix: {len(names)} patches x {len(rels)} releases")
    if jobs == 1:
        done = [_row(r, paths, own[r.version], checks, offline, gone[r.version]) for r in rels]
    else:
        with ProcessPoolExecutor(jobs) as pool:
            futures = [
                pool.submit(_row, r, paths, own[r.version], checks, offline, gone[r.version])
                for r in rels
            ]
            done = [f.result() for f in futures]
    rows = {v: (row, applies) for v, row, applies in done}
    return Matrix(
        source={p.stem: v for v, p in found},
        patches=names,
        releases={r.version: rows[r.version][0] for r in rels},
        pinned={r.version: r.status for r in rels},
        series={r.version: rows[r.version][1] for r in rels},
    )


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
