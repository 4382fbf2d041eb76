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
  gone      not in the release's series; patches.toml says upstream removed
            the code it changes by this release (its `gone`: a maintainer's
            decision, read from that release's source), and no anchor of its
            probe is in the installed files (probes.gone): the defect it
            fixes cannot occur here (as where vLLM removed the V1 proposer
            that the Kimi alias and the V1 backend fix change)
  missing   none of these
  modified  in the release's own series, and a file it touches is neither
            what vpatch wrote nor what RECORD lists: changed by hand

Ready when every one is applied, upstream or gone. `Readiness` is the one
answer `vpatch check` prints, `vpatch install` gives after its work and
`vpatch doctor` reports: `readiness()` reads it from an environment's files,
`expected_readiness()` from the patch set alone (`doctor --vllm R`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from .. import lock, probes, quilt, record
from ..errors import NewerRelease
from . import journal
from .dist import Dist
from .receipt import Receipt

STATUSES = ("applied", "upstream", "gone", "missing", "modified")
READY = ("applied", "upstream", "gone")
WHAT = "EAGLE-3 for DeepSeek-V3 / Kimi-K2.5 targets"  # what is ready, or not


@dataclass(frozen=True)
class Subject:
    patch: quilt.Patch
    own: bool  # in the installed release's own series
    gone: str | None = None  # patches.toml's: the release upstream removed its code by

    def removed(self, release: str) -> bool:
        """Whether patches.toml says upstream removed the patch's code by `release`."""
        try:
            return self.gone is not None and Version(self.gone) <= Version(release)
        except ValueError:  # not a version: nothing is said of it
            return False

    @property
    def name(self) -> str:
        return self.patch.name.removesuffix(".patch")


def newer(pins: lock.Lock, d: Dist, what: str) -> NewerRelease | None:
    """NewerRelease when the environment's vLLM is newer than the newest
    release vpatch pins (Lock.standing, the one answer doctor takes too):
    which series it needs, and whether upstream fixed what the series
    fixes, are unknown until it is carried."""
    return pins.standing(d.version).refusal(what)


def release_of(pins: lock.Lock, d: Dist) -> lock.Release | None:
    """The pinned release the environment's vLLM is (Lock.standing: a build
    of it, or a post release of it the lock does not pin), None when none."""
    rel = pins.standing(d.version).release
    return pins.releases[rel] if rel is not None else None


def own_series(pins: lock.Lock, d: Dist) -> tuple[lock.Release | None, quilt.Series | None]:
    release = release_of(pins, d)
    return release, pins.series(release) if release is not None else None


def subjects(pins: lock.Lock, own: quilt.Series | None) -> list[Subject]:
    out: dict[str, Subject] = {}
    about = pins.patchset.about
    for p in own.patches if own else ():
        out.setdefault(p.slug, Subject(p, True))
    extra = [pins.default()]
    if own is None:
        fixes = [v for v in pins.with_series() if pins.releases[v].status != "patched"]
        if fixes:
            extra.append(pins.releases[fixes[-1]])
    for rel in extra:
        for p in s.patches if (s := pins.series(rel)) else ():
            gone = about[p.slug].gone if p.slug in about else None
            out.setdefault(p.slug, Subject(p, False, gone))
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
        checks_of = wanted.get(s.patch.slug, [])
        holds = probes.holds(checks_of, texts)
        # gone: what patches.toml decided, and what the files show
        if not (s.own or holds) and s.removed(d.public) and probes.gone(checks_of, texts):
            out[s.name] = "gone"
            continue
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
        elif s.removed(version):
            out[s.name] = "gone"
        else:
            since = pins.patchset.upstream(s.patch.slug).release
            held = since is not None and Version(since) <= Version(version)
            out[s.name] = "upstream" if held else "missing"
    return out


def ready(status: dict[str, str]) -> bool:
    return bool(status) and all(v in READY for v in status.values())


@dataclass(frozen=True)
class Readiness:
    """The one answer about readiness for EAGLE-3 with DeepSeek-V3 /
    Kimi-K2.5 targets on one vLLM: each patch's status ("NNNN-slug" ->
    applied | upstream | gone | missing | modified), which of them the
    release's own series holds (what `vpatch install` installs), and whether
    it has one. `verdict()` is the line check prints, install repeats and
    doctor quotes."""

    release: str  # the installed release, e.g. "X.Y.Z"
    patches: dict[str, str]
    own: frozenset[str] = frozenset()
    series: bool = False  # the release has a series of its own in this vpatch

    @property
    def ready(self) -> bool:
        return ready(self.patches)

    @property
    def lacking(self) -> list[str]:
        return [n for n, s in self.patches.items() if s not in READY]

    def verdict(self, install: str) -> str:
        """`WHAT: ready`, or `WHAT: NOT ready (names); what to do`: `install`
        is the command that installs the series there, named only where it
        would help (a lacking patch is in the release's own series)."""
        if self.ready:
            return f"{WHAT}: ready"
        lacking = self.lacking
        if any(self.patches[n] == "modified" for n in lacking):
            then = f"a file was changed by hand: reinstall vLLM, then run `{install}`"
        elif any(n in self.own for n in lacking):
            then = f"run `{install}`"
        elif not self.series:
            then = f"vpatch has no series for vLLM {self.release}"
        else:
            which = "it" if len(lacking) == 1 else "them"
            then = (
                f"vpatch's {self.release} series does not carry {which}, and `vpatch install` "
                "has nothing more to install there"
            )
        return f"{WHAT}: NOT ready ({', '.join(lacking)}); {then}"


def install_command(python: str) -> str:
    """The `vpatch install` that installs the series into python's vLLM."""
    return f"vpatch install --python {shlex.quote(python)}"


def readiness(
    d: Dist,
    pins: lock.Lock,
    rows: dict[str, record.Row] | None,
    rec: Receipt | None,
    checks: probes.Probes,
) -> Readiness:
    """The answer for d's installed files (with RECORD's `rows` and vpatch's
    receipt `rec`, None for an editable install): what check, install and
    doctor each call."""
    _, own = own_series(pins, d)
    subs = subjects(pins, own)
    st = statuses(d, subs, own, rows, rec, checks)
    return Readiness(d.public, st, frozenset(s.name for s in subs if s.own), own is not None)


def expected_readiness(pins: lock.Lock, version: str, patched: bool) -> Readiness:
    """The answer for the pinned release `version` installed as released, or
    with its series installed (`expected`): `doctor --vllm R [--patched]`."""
    own = pins.series(version)
    subs = subjects(pins, own)
    names = frozenset(s.name for s in subs if s.own)
    return Readiness(version, expected(pins, version, patched), names, own is not None)
