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
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from . import gitutil, lock, probes, series, sources
from .errors import ConfigError, IntegrityError
from .paths import safe_relpath

STATUSES = ("clean", "offset", "fuzz", "conflict", "upstream")
LEGEND = (
    "clean: applies as is; offset: applies at moved lines; fuzz: applies only with "
    "less context; conflict: does not apply; upstream: the release already has it"
)
_OFFSET = re.compile(r"Hunk #\d+ succeeded at \d+ \(offset")
_REDUCED = re.compile(r"Context reduced to")


# -- the few files of a release ----------------------------------------------


def release_files(release: lock.Release, globs: set[str], offline: bool = False) -> Path:
    """A folder holding the release's files matching globs (paths or globs
    whose `*` stays in one folder), read from its sdist or wheel once and
    cached by the artifact's sha256."""
    kind = sources.resolve(release, "auto")
    art = release.artifact(kind)
    home = sources.cache_dir() / "files" / art.sha256
    manifest = home / "manifest.json"
    seen = json.loads(manifest.read_text()) if manifest.is_file() else {}
    todo = sorted(set(globs) - set(seen))
    if todo:
        found = _read_members(sources.download(art, offline), kind, todo)
        for rel, (data, mode) in found.items():
            _write(home / "tree" / rel, data, mode)
        for g in todo:
            seen[g] = sorted(r for r in found if probes.matches(r, g))
        home.mkdir(parents=True, exist_ok=True)
        tmp = manifest.with_name(f".manifest.{os.getpid()}")
        tmp.write_text(json.dumps(seen, indent=1, sort_keys=True))
        tmp.replace(manifest)
    return home / "tree"


def _read_members(archive: Path, kind: str, globs: list[str]) -> dict[str, tuple[bytes, int]]:
    """{relative path: (bytes, mode)} of the members matching globs; an sdist's
    top folder is stripped."""
    out = {}
    what = archive.name

    def wanted(rel: str) -> bool:
        return any(probes.matches(rel, g) for g in globs)

    if kind == "sdist":
        with tarfile.open(archive, "r|gz") as tar:  # one pass, no index
            for m in tar:
                parts = PurePosixPath(m.name).parts
                rel = "/".join(parts[1:])
                if m.isfile() and len(parts) > 1 and wanted(rel):
                    safe_relpath(rel, what)
                    out[rel] = (tar.extractfile(m).read(), m.mode)
        return out
    try:
        zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile:
        raise IntegrityError(f"{what} is not a valid zip file") from None
    with zf:
        for info in zf.infolist():
            if not info.is_dir() and wanted(info.filename):
                safe_relpath(info.filename, what)
                out[info.filename] = (zf.read(info), (info.external_attr >> 16) or 0o644)
    return out


def _write(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    tmp.chmod(0o755 if mode & 0o111 else 0o644)  # git records only the x bit
    tmp.replace(path)


def resolve(pins: lock.Lock, version: str, offline: bool = False) -> lock.Release:
    """A pinned release, or one looked up on the package index on demand."""
    v = version.removeprefix("v")
    if v in pins.releases:
        return pins.releases[v]
    if offline:
        raise ConfigError(f"{version} is not pinned in VERSIONS.lock; drop --offline to look it up")
    from .refresh import artifacts_for, commit_of

    arts = artifacts_for(v)
    if "sdist" not in arts and "wheel" not in arts:
        raise ConfigError(f"the package index has no sdist or x86_64 wheel of vLLM {v}")
    return lock.Release(v, f"v{v}", commit_of(arts), "unpinned", "", arts)


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
        if probes.holds(checks.get(probes.key(p.name), []), pristine):
            out[p.slug] = "upstream"
        else:
            out[p.slug] = try_patch(tree, p.path)
    return out


def _row(release: lock.Release, series_dir: Path, checks: probes.Probes, offline: bool):
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
    say: Callable[[str], None] = lambda _: None,
) -> Matrix:
    """The matrix over `versions` (default: every pinned release) for the
    patches of series_dir (default: the newest patched release's series)."""
    pins = pins or lock.load()
    series_dir = Path(series_dir or pins.default().series_dir())
    checks = probes.load(meta_path or pins.path.parent / "patches" / probes.PATCHES_TOML.name)
    names = [p.slug for p in series.load(series_dir).patches]
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
        series=_shown(series_dir),
        patches=names,
        releases={r.version: rows[r.version] for r in rels},
        pinned={r.version: r.status for r in rels},
    )


def _shown(path: Path) -> str:
    try:
        return path.resolve().relative_to(lock.ROOT).as_posix()
    except ValueError:
        return str(path)
