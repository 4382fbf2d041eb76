"""`vpatch lint`: the patch sets are consistent, well-formed and up to date.

- every series folder is pinned by VERSIONS.lock and vice versa, and each
  `series` file and its folder's .patch files agree;
- file names are NNNN-<key of subject>.patch, numbered in series order;
- DEP-3 fields are present and well-formed;
- every series is up to date: applied to its release's files (from the cache,
  downloaded when missing) and exported again, it gives the same bytes;
- a patch carries the same change in every release that has it (added and
  removed lines; context may differ), unless patches.toml declares the
  release's copy a deliberate variant (0.15.x's 0002 and 0004);
- every patch of the newest series has an upstream probe, and patches.toml
  names only patches that exist.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .. import lock, probes, series
from .. import tree as trees
from ..errors import NetworkError, VpatchError
from ..sources.cache import Say, quiet
from ..sources.files import release_files

_URL = r"https?://\S+"
_ORIGIN = re.compile(rf"^(upstream|backport|vendor|other)(,\s*({_URL}|commit:[0-9a-f]{{7,40}}))?$")
_FORWARDED = re.compile(rf"^(yes|no|not-needed|{_URL})$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Problem:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


Add = Callable[[Problem], None]


@dataclass
class Linted:
    problems: list[Problem] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def lint(
    pins: lock.Lock | None = None,
    meta_path: Path | None = None,
    offline: bool = False,
    sources: bool = True,
    say: Say = quiet,
) -> Linted:
    """Lint every series of pins (and patches/ beside its lock file).
    `sources=False` leaves out the up-to-date check, the one that reads the
    releases' files; with `offline`, releases not in the cache are skipped."""
    pins = pins or lock.load()
    root = pins.root
    meta_path = meta_path or pins.patches_toml
    out = Linted()
    add = out.problems.append
    loaded: dict[str, series.Series] = {}
    pinned = {}
    for v in pins.with_series():
        d = pins.series_dir(v)
        pinned[d.resolve()] = v
        if not d.is_dir():
            add(Problem(pins.path.name, f"{v}: series folder {_rel(d, root)} does not exist"))
    for d in sorted((root / "patches").iterdir()) if (root / "patches").is_dir() else []:
        has_series = d.is_dir() and (any(d.glob("*.patch")) or (d / "series").exists())
        if has_series and d.resolve() not in pinned:
            add(Problem(_rel(d, root), "no release in VERSIONS.lock pins this series"))
    for d, v in pinned.items():
        if d.is_dir():
            s = _series(d, root, add)
            if s is not None:
                loaded[v] = s
    for s in loaded.values():
        for i, p in enumerate(s.patches, 1):
            _patch(p, i, _rel(p.path, root), add)
    groups = _meta(pins, loaded, meta_path, add)
    _same_change(loaded, groups, root, add)
    if sources:
        for v, s in loaded.items():
            say(f"lint: {v}: apply and export")
            _up_to_date(pins, v, s, root, offline, out)
    return out


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _series(d: Path, root: Path, add: Add) -> series.Series | None:
    where = _rel(d, root)
    if not (d / "series").is_file():
        add(Problem(where, "no series file"))
        return None
    names = series.read_names(d / "series")
    for name in sorted({n for n in names if names.count(n) > 1}):
        add(Problem(f"{where}/series", f"{name} is listed twice"))
    for name in names:
        if not (d / name).is_file():
            add(Problem(f"{where}/series", f"lists {name}, which does not exist"))
    for p in sorted(d.glob("*.patch")):
        if p.name not in names:
            add(Problem(f"{where}/{p.name}", "not listed in the series file"))
    patches = []
    for name in names:
        try:
            patches.append(series.parse(d / name))
        except FileNotFoundError:
            pass  # reported above
        except VpatchError as e:
            add(Problem(f"{where}/{name}", str(e)))
    return series.Series(d, patches) if len(patches) == len(names) else None


def _patch(p: series.Patch, i: int, where: str, add: Add) -> None:
    want = series.file_name(i, p.subject)
    if p.name != want:
        add(
            Problem(
                where, f"is number {i} in the series with subject {p.subject!r}: name it {want}"
            )
        )
    for name in series.REQUIRED_FIELDS:
        if not p.fields.get(name, "").strip():
            add(Problem(where, f"DEP-3 field {name} is missing or empty"))
    f = p.fields
    if f.get("Origin") and not _ORIGIN.match(f["Origin"]):
        add(Problem(where, f"Origin {f['Origin']!r}: use upstream|backport|vendor|other[, URL]"))
    if f.get("Forwarded") and not _FORWARDED.match(f["Forwarded"]):
        add(Problem(where, f"Forwarded {f['Forwarded']!r}: use yes|no|not-needed|URL"))
    if "Applied-Upstream" in f and not _applied(f["Applied-Upstream"]):
        add(Problem(where, f"Applied-Upstream {f['Applied-Upstream']!r}: use a version or URL"))
    if f.get("Last-Update") and not _is_date(f["Last-Update"]):
        add(Problem(where, f"Last-Update {f['Last-Update']!r} is not a date (YYYY-MM-DD)"))


def _applied(value: str) -> bool:
    """A version, a URL, or DEP-3's "version, URL"."""
    for part in (x.strip() for x in value.split(",")):
        if re.fullmatch(_URL, part):
            continue
        try:
            Version(part)
        except InvalidVersion:
            return False
    return bool(value.strip())


def _is_date(value: str) -> bool:
    if not _DATE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _same_change(
    loaded: dict[str, series.Series], groups: dict[str, list[set[str]]], root: Path, add: Add
) -> None:
    """Same-named patches change the same lines in every release, within each
    declared group of variant releases and among the releases in none."""
    copies: dict[tuple[str, int], list[series.Patch]] = {}
    for v in sorted(loaded, key=Version, reverse=True):  # newest first: the reference
        for p in loaded[v].patches:
            group = next((i for i, g in enumerate(groups.get(p.key, []), 1) if v in g), 0)
            copies.setdefault((p.key, group), []).append(p)
    for same in copies.values():
        ref = same[0]
        for p in same[1:]:
            if p.changes() != ref.changes():
                add(
                    Problem(
                        _rel(p.path, root),
                        f"changes other lines than {_rel(ref.path, root)}; make them agree, or "
                        f"declare the release a variant in patches.toml",
                    )
                )


def _meta(
    pins: lock.Lock, loaded: dict[str, series.Series], path: Path, add: Add
) -> dict[str, list[set[str]]]:
    """Checks patches.toml against the series; returns the declared variants."""
    try:
        checks, groups = probes.load(path), probes.variants(path)
    except VpatchError as e:
        add(Problem(path.name, str(e)))
        return {}
    newest = pins.default().version
    carried: dict[str, set[str]] = {}
    for v, s in loaded.items():
        for p in s.patches:
            carried.setdefault(p.key, set()).add(v)
    for p in loaded[newest].patches if newest in loaded else []:
        if not checks.get(p.key):
            add(Problem(path.name, f"no probe for {p.name} (the matrix cannot tell `upstream`)"))
    for name in sorted((set(checks) | set(groups)) - set(carried)):
        add(Problem(path.name, f"[{name}] names no patch"))
    for name, gs in sorted(groups.items()):
        for v in sorted(set().union(*gs) - carried.get(name, set())):
            add(Problem(path.name, f"[{name}] variants: {v} does not carry the patch"))
    return groups


def _up_to_date(
    pins: lock.Lock, version: str, s: series.Series, root: Path, offline: bool, out: Linted
) -> None:
    where = _rel(s.dir, root)
    try:
        files = release_files(pins.releases[version], set(s.files), offline)
    except NetworkError as e:
        if not offline:
            raise
        out.skipped.append(f"{where}: not checked against its release: {e}")
        return
    with tempfile.TemporaryDirectory(prefix="vpatch-lint-") as tmp:
        dest = Path(tmp) / "tree"
        try:
            trees.apply(pins.releases[version], s, dest, source=str(files))
        except VpatchError as e:
            out.problems.append(Problem(where, f"does not apply to vLLM {version}: {e}"))
            return
        repo, _ = trees.open_tree(dest)
        fresh = trees.render(repo, trees.BASE_TAG.format(version))
    for name, data in fresh.items():
        path = s.dir / name
        if not path.is_file() or path.read_bytes() != data:
            out.problems.append(
                Problem(
                    f"{where}/{name}",
                    "is not what apply + export gives; run `vpatch apply "
                    f"{version}` and `vpatch export build/vllm-{version}`",
                )
            )
