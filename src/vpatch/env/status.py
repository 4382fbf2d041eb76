"""Each patch as it stands in an installed vLLM.

Which patches: the series of the installed release when it has one; then
the EAGLE-3 series of the newest patched release (its patches are what
EAGLE-3 for DeepSeek-V3 / Kimi-K2.5 needs; releases that have them
upstream report them as such); and, for a release without a series, the
series of the newest release that carries fixes upstream still lacks.
A patch is known by its slug, so the same patch in two series is one.

  applied   in the release's own series, and there: vpatch installed it and
            the files are what it wrote, or the files are the recorded ones
            of a patched build (a `+eagle3.<hash>` wheel) and its probe holds
  upstream  not in the release's series, and its probe (patches/patches.toml)
            holds on the installed files: the release does it itself
  missing   neither
  modified  in the release's own series, and a file it touches is neither
            what vpatch wrote nor what RECORD lists: changed by hand
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from .. import lock, probes, quilt, record
from . import journal
from .dist import Dist
from .receipt import Receipt

STATUSES = ("applied", "upstream", "missing", "modified")
READY = ("applied", "upstream")


@dataclass(frozen=True)
class Subject:
    patch: quilt.Patch
    own: bool  # in the installed release's own series

    @property
    def name(self) -> str:
        return self.patch.name.removesuffix(".patch")


def own_series(pins: lock.Lock, d: Dist) -> tuple[lock.Release | None, quilt.Series | None]:
    release = pins.releases.get(d.public)
    return release, pins.series(release) if release is not None else None


def subjects(pins: lock.Lock, own: quilt.Series | None) -> list[Subject]:
    out: dict[str, Subject] = {}
    for p in own.patches if own else ():
        out.setdefault(p.slug, Subject(p, True))
    extra = [pins.default()]
    if own is None:
        fixes = [v for v in pins.with_series() if pins.releases[v].status != "patched"]
        if fixes:
            extra.append(pins.releases[fixes[-1]])
    for rel in extra:
        for p in s.patches if (s := pins.series(rel)) else ():
            out.setdefault(p.slug, Subject(p, False))
    return list(out.values())


def wheel_series(d: Dist) -> str | None:
    """The series hash chunk of a vpatch wheel's version (`+eagle3.<hash>`)."""
    parts = d.local.split(".") if d.local else []
    if "eagle3" in parts and parts.index("eagle3") + 1 < len(parts):
        return parts[parts.index("eagle3") + 1]
    return None


def same_hash(chunk: str, content_hash: str) -> bool:
    """A version's hash chunk against a series hash (PEP 440 normalization
    drops the leading zeros of an all-digit chunk)."""
    want = str(Version(f"0+eagle3.{content_hash[:8]}").local).split(".")[-1]
    return chunk.lower() == want


def statuses(
    d: Dist,
    subs: list[Subject],
    own: quilt.Series | None,
    rows: dict[str, record.Row] | None,
    rec: Receipt | None,
    checks: probes.Probes,
) -> dict[str, str]:
    """{patch name without .patch: status} for d's installed files."""
    keys = {s.patch.slug for s in subs}
    wanted = {k: checks[k] for k in keys if k in checks}
    texts = probes.folder_files(d.root, probes.patterns(wanted))
    chunk = wheel_series(d)
    built = bool(own and chunk and same_hash(chunk, own.content_hash()))
    hashes: dict[str, str | None] = {}

    def current(f: str) -> str | None:
        if f not in hashes:
            hashes[f] = journal.hash_file(d.root / f)
        return hashes[f]

    out = {}
    for s in subs:
        holds = probes.holds(wanted.get(s.patch.slug, []), texts)
        out[s.name] = _status(s, d.root, rows, rec, holds, built, current)
    return out


def _status(
    s: Subject,
    root: Path,
    rows: dict[str, record.Row] | None,
    rec: Receipt | None,
    holds: bool,
    built: bool,
    current: Callable[[str], str | None],
) -> str:
    if not s.own:
        return "upstream" if holds else "missing"
    if rec is not None and s.patch.name in rec.patches:
        changed = any(current(f) != rec.files[f].patched for f in s.patch.files if f in rec.files)
        return "modified" if changed else "applied"
    if rows is not None:
        for f in s.patch.files:
            row = rows.get(f)
            if row is not None and row.hash and not matches(root / f, row.hash, current(f)):
                return "modified"
    return "applied" if built or holds else "missing"


def matches(path: Path, spec: str, sha: str | None) -> bool:
    """Whether the file (whose sha256 spec is `sha`, None: absent) has the
    RECORD hash spec."""
    if sha is None:
        return False
    algo, _, value = spec.partition("=")
    if algo == record.ALGORITHM:
        return sha == f"{algo}={value.rstrip('=')}"
    try:
        return record.check(path.read_bytes(), spec)
    except (OSError, record.RecordError):
        return False


def expected(pins: lock.Lock, version: str, patched: bool) -> dict[str, str]:
    """What `statuses` reports for the pinned release `version` as released
    (its pinned artifact, unchanged) or, `patched`, with its own series
    installed (`vpatch install`, or vpatch's wheel of it), told from the patch
    set alone, no file read: a patch of the release's own series is
    `applied` when installed, else `missing` (a variant serves only releases
    before upstream takes the change, where its probe does not hold); any
    other patch is `upstream` from the release its DEP-3 Applied-Upstream
    names on, else `missing`. tests/integration/test_probes_real.py holds
    the probes to this on every pinned release's own files."""
    out = {}
    for s in subjects(pins, pins.series(version)):
        if s.own:
            out[s.name] = "applied" if patched else "missing"
        else:
            since = pins.patchset.upstream(s.patch.slug).release
            held = since is not None and Version(since) <= Version(version)
            out[s.name] = "upstream" if held else "missing"
    return out


def ready(status: dict[str, str]) -> bool:
    return bool(status) and all(v in READY for v in status.values())
