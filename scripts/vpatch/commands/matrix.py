"""`vpatch matrix`: how each patch of the newest series fares on each release.

A status per (release, patch): `upstream` when the patch's probe (probes.py)
finds the behaviour in the release's own source; otherwise the patch is
applied, in series order, to the release's copies of the files it touches:
`clean`, `offset` (at moved lines), `fuzz` (only with context reduced to one
line, like `patch`'s default fuzz 2) or `conflict`.

Only the few files the patches and probes read are taken from each release,
as member reads from the cached sdist or wheel, and kept under
<cache>/files/<artifact sha256>/ so that warm runs never open an archive.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import gitutil, lock, probes, series
from ..sources.cache import Say, quiet
from ..sources.files import release_files
from ..sources.refresh import resolve

LEGEND = (
    "clean: applies as is; offset: applies at moved lines; fuzz: applies only with "
    "less context; conflict: does not apply; upstream: the release already has it"
)
_OFFSET = re.compile(r"Hunk #\d+ succeeded at \d+ \(offset")
_REDUCED = re.compile(r"Context reduced to")


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
    tree: Path, patches: list[series.Patch], checks: probes.Probes, files: Path | None = None
) -> dict[str, str]:
    """The status of each patch on the release files in tree (which this
    changes: the patches are applied in order). Probes read `files`, the
    pristine copy, when given, else tree before anything is applied."""
    pristine = probes.folder_files(files or tree, probes.patterns(checks))
    out = {}
    for p in patches:
        if probes.holds(checks.get(p.key, []), pristine):
            out[p.stem] = "upstream"
        else:
            out[p.stem] = try_patch(tree, p.path)
    return out


def _row(
    release: lock.Release, series_dir: Path, checks: probes.Probes, offline: bool
) -> tuple[str, dict[str, str]]:
    todo = series.load(series_dir).patches
    globs = set(series.Series(series_dir, todo).files) | probes.patterns(checks)
    cached = release_files(release, globs, offline)
    with tempfile.TemporaryDirectory(prefix="vpatch-matrix-") as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(cached, tree)
        return release.version, classify(tree, todo, checks, files=cached)


# -- the matrix ------------------------------------------------------------------


@dataclass
class Matrix:
    series: str
    patches: list[str]
    releases: dict[str, dict[str, str]]
    pinned: dict[str, str]  # release -> its lock status, or "unpinned"

    def to_json(self) -> str:
        return json.dumps({"releases": self.releases}, indent=2) + "\n"

    def to_markdown(self) -> str:
        head = ["release", "lock", "needs", *(p[:4] for p in self.patches)]
        rows = []
        for v, row in self.releases.items():
            needs = sum(s != "upstream" for s in row.values())
            rows.append([v, self.pinned[v], f"{needs}/{len(row)}", *row.values()])
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

        def line(cells: list[str]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)) + " |"

        out = [f"Patches of {self.series} on each release", "", line(head)]
        out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        out += [line(r) for r in rows]
        out.append("")
        out += [f"- {p[:4]}: {p[5:]}" for p in self.patches]
        out += ["", LEGEND]
        return "\n".join(out) + "\n"


def build(
    versions: list[str] | None = None,
    pins: lock.Lock | None = None,
    series_dir: Path | None = None,
    meta_path: Path | None = None,
    offline: bool = False,
    jobs: int | None = None,
    say: Say = quiet,
) -> Matrix:
    """The matrix over `versions` (default: every pinned release) for the
    patches of series_dir (default: the newest patched release's series)."""
    pins = pins or lock.load()
    series_dir = Path(series_dir or pins.series_dir(pins.default()))
    checks = probes.load(meta_path or pins.patches_toml)
    names = [p.stem for p in series.load(series_dir).patches]
    rels = [resolve(pins, v, offline) for v in versions] if versions else None
    rels = rels or [pins.releases[v] for v in pins.versions()]
    rels = sorted({r.version: r for r in rels}.values(), key=lambda r: r.key)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(rels)))
    say(f"matrix: {len(names)} patches x {len(rels)} releases")
    if jobs == 1:
        rows = dict(_row(r, series_dir, checks, offline) for r in rels)
    else:
        with ProcessPoolExecutor(jobs) as pool:
            futures = [pool.submit(_row, r, series_dir, checks, offline) for r in rels]
            rows = dict(f.result() for f in futures)
    return Matrix(
        series=_shown(series_dir, pins.root),
        patches=names,
        releases={r.version: rows[r.version] for r in rels},
        pinned={r.version: r.status for r in rels},
    )


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
