"""The patch set: one file per change and variant, mapped to the releases
it serves (quilt's one series, Spack's `patch(..., when="@a:b")`), and
every other fact of a patch the code and the docs need.

    patches/<slug>/<first>.patch   a `git format-patch` mail with DEP-3 fields,
                                   exported from release <first>
    patches/patches.toml           one table per slug, in series order:
                                   `releases`: the variants, "first:last" spans
                                   (or one "release") of pinned releases;
                                   `summary`, `markers`, `doctor`,
                                   `explanation`, `eagle3`, `gone`
                                   (About); probes and PR titles
                                   (probes.py)

A variant serves every pinned release from its first to its last; a
release's series is the variant of each slug that serves it, in the order
of the tables, numbered from 1 (`NNNN-<slug>.patch`, as `git format-patch`
names them): nothing says twice which release gets what. Within a span the
code around the change is the same, so one file applies to all of them with
full context (git am, `patch -p1`); only where it sits (hunk positions) and
the blob ids of `index` lines may differ from the release it was exported
from. `vpatch lint` checks both; `vpatch series V --out DIR` writes a
release's series as plain files.

Where upstream stands is not written here: it is read from the DEP-3
fields of the patch's newest variant (upstream()). Everything that names a
patch's releases, its tier markers or its defect key elsewhere derives them
from this table (doctor's fixes(), the tier's markers, the generated
README table and docs/patches.md).

Writing it (what `vpatch export` and `port` record) is patchset_write.py's,
which writes a loaded set too (set_spans(), forget()): it stays equal to
its files, and no caller loads them again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomllib
from packaging.version import Version

from . import quilt, settings
from .errors import ConfigError, PatchError, disk_error
from .quilt import Series, parse

KEY = "releases"  # the patches.toml key holding a slug's variants
# Every key a table may have: its variants and About's, and what probes.py
# reads (the probe, and how `vpatch pr` titles the patch).
TABLE_KEYS = frozenset({KEY, "summary", "markers", "doctor", "explanation", "eagle3", "gone"})
PROBE_KEYS = frozenset({"probe", "pr_prefix", "pr_title"})
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")  # a pytest marker, a doctor key


@dataclass(frozen=True)
class About:
    """What patches.toml says of a patch besides its variants and probe.

    summary      one line for a user: what the patch makes true (the
                 README's patch table); its DEP-3 Description says what the
                 change does, for vLLM's reviewers
    markers      the inner suite's pytest markers of its patch-effect tests
                 (tests/vllm/release): a release whose series carries none
                 of a marker's patches leaves those tests out
    doctor       doctor's key of the defect it fixes (doctor/defects.py)
    explanation  the long explanation, markdown (docs/patches.md)
    eagle3       part of EAGLE-3 itself for these targets (what upstream
                 gained later: rules.toml's upstream_eagle3), not a fix on
                 top: a release whose series carries one is `patched`
                 (PatchSet.status)
    gone         the release from which upstream has removed the code the
                 patch changes, so that the defect it fixes cannot occur
                 there: a maintainer's decision, read from that release's
                 source (docs/maintaining.md, "Code upstream removed").
                 From it on, where the probe's anchors are absent too, the
                 patch counts as `gone`, which is ready (env/readiness.py);
                 no variant may serve it or a later release"""

    summary: str = ""
    markers: tuple[str, ...] = ()
    doctor: str | None = None
    explanation: str = ""
    eagle3: bool = False
    gone: str | None = None


@dataclass(frozen=True)
class Upstream:
    """Where upstream stands on a patch: DEP-3 `Origin`, `Applied-Upstream`
    and `Forwarded` of its newest variant, read, never retyped."""

    origin: str  # Origin's kind: upstream, backport, vendor, other
    link: str  # Origin's URL, else Forwarded's, else ""
    release: str | None  # Applied-Upstream's release: upstream has it from there
    merged: str | None  # Applied-Upstream's URL: merged after the last release
    forwarded: str  # Forwarded: yes, no, not-needed or a URL

    @classmethod
    def of(cls, fields: dict[str, str]) -> Upstream:
        """From a patch's DEP-3 fields (quilt.Patch.fields, quilt.fields_of)."""
        origin, _, link = fields.get("Origin", "").partition(",")
        forwarded = fields.get("Forwarded", "")
        releases, urls = quilt.applied(fields.get("Applied-Upstream", ""))
        if not link.strip() and forwarded.startswith(("http://", "https://")):
            link = forwarded
        return cls(
            origin.strip(),
            link.strip(),
            releases[0] if releases else None,
            urls[0] if urls else None,
            forwarded,
        )

    def describe(self) -> str:
        if self.release:
            return f"upstream from {self.release}"
        if self.merged:
            return "merged upstream, in no release yet"
        if self.forwarded.startswith(("http://", "https://")):
            return "sent upstream, not merged"
        return "not upstream"


@dataclass(frozen=True)
class Variant:
    slug: str
    first: str
    last: str
    path: Path

    @property
    def span(self) -> str:
        return self.first if self.first == self.last else f"{self.first}:{self.last}"

    def covers(self, version: str) -> bool:
        return Version(self.first) <= Version(version) <= Version(self.last)


@dataclass
class PatchSet:
    """What patches.toml and patches/ say: slugs in series order, each with
    its variants (oldest first)."""

    toml: Path
    slugs: list[str] = field(default_factory=list)
    variants: dict[str, list[Variant]] = field(default_factory=dict)
    about: dict[str, About] = field(default_factory=dict)
    # patches.toml as parsed, for what other modules read of it (probes.py)
    tables: dict[str, Any] = field(default_factory=dict, repr=False)
    # each variant's file, parsed once: series of several releases share files
    _parsed: dict[Path, quilt.Patch] = field(default_factory=dict, repr=False, compare=False)

    @property
    def dir(self) -> Path:
        return self.toml.parent

    def file(self, slug: str, first: str) -> Path:
        return self.dir / slug / f"{first}.patch"

    def variant(self, slug: str, version: str) -> Variant | None:
        return next((v for v in self.variants.get(slug, []) if v.covers(version)), None)

    def serving(self, slug: str, versions: list[str]) -> list[str]:
        """The releases of `versions` that `slug` serves."""
        return [v for v in versions if self.variant(slug, v) is not None]

    def gone(self, release: str) -> frozenset[str]:
        """The slugs whose code upstream removed by `release` (their `gone`)."""
        v = Version(release)
        return frozenset(s for s, a in self.about.items() if a.gone and Version(a.gone) <= v)

    def fixes(self) -> dict[str, str]:
        """{doctor's defect key: the slug of the patch that fixes it}."""
        return {a.doctor: s for s, a in self.about.items() if a.doctor}

    def markers(self) -> dict[str, list[str]]:
        """{inner pytest marker: the slugs whose tests it marks}, in table order."""
        out: dict[str, list[str]] = {}
        for s in self.slugs:
            for m in self.about[s].markers:
                out.setdefault(m, []).append(s)
        return out

    def upstream(self, slug: str) -> Upstream:
        """Where upstream stands on `slug`, from its newest variant's DEP-3."""
        newest = self.variants[slug][-1]
        parsed = self._parsed.get(newest.path)
        return Upstream.of(parsed.fields if parsed else quilt.fields_of(self.path(newest)))

    def carried(self, version: str) -> list[Variant]:
        """The variants that make up `version`'s series, in series order."""
        found = (self.variant(s, version) for s in self.slugs)
        return [v for v in found if v is not None]

    def status(self, version: str) -> str:
        """VERSIONS.lock's status of `version`, as its series makes it:
        `patched` (it carries part of EAGLE-3 itself), `upstream-fix` (only
        fixes on top of upstream's EAGLE-3) or `upstream` (no series).
        `vpatch lint` holds the lock to it; port and carry write it."""
        carried = self.carried(version)
        if not carried:
            return "upstream"
        return "patched" if any(self.about[v.slug].eagle3 for v in carried) else "upstream-fix"

    def named(self, version: str) -> list[tuple[str, Variant]]:
        """`version`'s series as (file name, variant), in order, nothing read:
        the names `git format-patch` gives them, `NNNN-<slug>.patch`."""
        return [(f"{i:04d}-{v.slug}.patch", v) for i, v in enumerate(self.carried(version), 1)]

    def newest(self, versions: list[str]) -> list[tuple[str, str, Variant]]:
        """Each patch once, as the newest of `versions` that carries it has it:
        (that release, the patch's name in its series, the variant), in the
        order of the tables (every series' order). Nothing is read."""
        out = []
        for slug in self.slugs:
            serving = self.serving(slug, versions)
            if serving:
                found = next((n, v) for n, v in self.named(serving[-1]) if v.slug == slug)
                out.append((serving[-1], *found))
        return out

    def path(self, v: Variant) -> Path:
        """The variant's file; PatchError when patches.toml names a missing one."""
        if not v.path.is_file():
            raise PatchError(
                f"{self.toml.name} [{v.slug}]: variant {v.span} has no file "
                f"{v.slug}/{v.first}.patch"
            )
        return v.path

    def patch(self, v: Variant, name: str) -> quilt.Patch:
        """The variant's file, parsed (once), as `name` (its name in a series)."""
        p = self._parsed.get(v.path)
        if p is None:
            p = self._parsed[v.path] = parse(self.path(v), name=name)
        return p if p.name == name else replace(p, name=name)

    def set_spans(self, slug: str, spans: list[tuple[str, str]], after: str | None = None) -> None:
        """Make `slug`'s variants (first, last) `spans` in this object, as
        patchset_write.set_spans makes them in patches.toml (a new slug's
        table after `after`'s, else last, with no other key): what record()
        writes, it writes here too, so that the set never disagrees with its
        files (as wheel's WheelFile keeps its hashes on every write)."""
        self.variants[slug] = [Variant(slug, f, la, self.file(slug, f)) for f, la in spans]
        if slug not in self.slugs:
            at = self.slugs.index(after) + 1 if after in self.slugs else len(self.slugs)
            self.slugs.insert(at, slug)
            self.about[slug] = About()
            self.tables[slug] = {}
        self.tables[slug][KEY] = [f if f == la else f"{f}:{la}" for f, la in spans]
        ordered = {s: self.tables[s] for s in self.slugs}  # the file's order
        self.tables.clear()
        self.tables.update(ordered)

    def forget(self, paths: list[Path]) -> None:
        """Parse these variant files anew when next asked: they were written
        over or removed (patchset_write.record)."""
        for path in paths:
            self._parsed.pop(path, None)

    def check(self) -> None:
        """Every variant's file, read and parsed: the first missing or
        malformed one is the PatchError a series naming it gives. What a
        command that copies the whole set (carry) runs before it downloads."""
        for slug in self.slugs:
            for v in self.variants[slug]:
                self.patch(v, f"{slug}.patch")

    def series(self, version: str) -> Series | None:
        """`version`'s series (None: it carries no patch)."""
        named = self.named(version)
        if not named:
            return None
        return Series([self.patch(v, n) for n, v in named], name=version)


def _span(where: str, text: object) -> tuple[str, str]:
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{where}: {KEY} lists spans 'first:last' or one release")
    first, _, last = text.partition(":")
    first, last = first.strip(), (last.strip() or first.strip())
    try:
        if Version(first) > Version(last):
            raise ConfigError(f"{where}: span {text!r} ends before it starts")
    except ValueError:  # InvalidVersion, or a part of over 4300 digits
        raise ConfigError(
            f"{where}: {settings.shown(text)} is not a release or a span of releases"
        ) from None
    return first, last


def read(path: Path) -> dict[str, Any]:
    """patches.toml as data ({} when there is none)."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, UnicodeDecodeError) as e:  # TOMLDecodeError; int() over 4300 digits
        raise ConfigError(f"{path.name} is not valid TOML: {settings.shown(str(e), 160)}") from None
    except OSError as e:
        raise disk_error(e, f"cannot read {path.name}") from None


def _about(where: str, t: dict[str, Any]) -> About:
    def text(key: str) -> str:
        value = t.get(key, "")
        if not isinstance(value, str):
            raise ConfigError(f"{where}: {key} is a string")
        return value.strip()

    summary = text("summary")
    if "\n" in summary:
        raise ConfigError(f"{where}: summary is one line")
    markers = t.get("markers", [])
    if not isinstance(markers, list) or not all(
        isinstance(m, str) and _NAME.match(m) for m in markers
    ):
        raise ConfigError(f"{where}: markers is a list of pytest marker names")
    doctor = text("doctor") or None
    if doctor is not None and not _NAME.match(doctor):
        raise ConfigError(f"{where}: doctor {doctor!r} is not a key (a-z, 0-9, _)")
    eagle3 = t.get("eagle3", False)
    if not isinstance(eagle3, bool):
        raise ConfigError(f"{where}: eagle3 is true or false")
    gone = text("gone") or None
    if gone is not None:
        try:
            Version(gone)
        except ValueError:  # InvalidVersion, or a part of over 4300 digits
            raise ConfigError(f"{where}: gone {settings.shown(gone)} is not a release") from None
    return About(summary, tuple(markers), doctor, text("explanation"), eagle3, gone)


def load(path: Path) -> PatchSet:
    out = PatchSet(path, tables=read(path))
    doctors: dict[str, str] = {}
    for slug, t in out.tables.items():
        if not isinstance(t, dict):
            raise ConfigError(f"{path.name} [{slug}]: not a table")
        where = f"{path.name} [{slug}]"
        unknown = set(t) - TABLE_KEYS - PROBE_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
        spans = t.get(KEY, [])
        if not isinstance(spans, list):
            raise ConfigError(f"{where}: {KEY} is a list of spans")
        about = _about(where, t)
        if about.doctor in doctors:
            raise ConfigError(
                f"{where}: doctor key {about.doctor!r} is already [{doctors[about.doctor]}]'s"
            )
        if about.doctor:
            doctors[about.doctor] = slug
        found = sorted((_span(where, s) for s in spans), key=lambda fl: Version(fl[0]))
        for (_, a_last), (b_first, _) in zip(found, found[1:], strict=False):
            if Version(b_first) <= Version(a_last):
                raise ConfigError(f"{where}: variants {a_last} and {b_first} overlap")
        if about.gone and found and Version(found[-1][1]) >= Version(about.gone):
            raise ConfigError(
                f"{where}: gone {about.gone}, but variant {found[-1][0]} serves releases up "
                f"to {found[-1][1]}: a patch cannot change code its release no longer has"
            )
        out.slugs.append(slug)
        out.variants[slug] = [Variant(slug, f, la, out.file(slug, f)) for f, la in found]
        out.about[slug] = about
    return out


# -- comparing copies of a change across releases ---------------------------------

_INDEX = re.compile(rb"^index [0-9a-f]+\.\.[0-9a-f]+( \d+)?$", re.M)
_HUNK = re.compile(rb"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@", re.M)
_FROM = re.compile(rb"^From [0-9a-f]{40} ", re.M)


def same_change(a: bytes, b: bytes) -> bool:
    """Two exports of one change agree but for where it sits: the commit id,
    blob ids (index lines), hunk positions and a diffstat (plain `git
    format-patch` writes one, ours not) may differ; message, context and
    changed lines may not."""
    return normalized(a) == normalized(b)


def normalized(data: bytes) -> bytes:
    head, sep, diff = data.partition(b"\ndiff --git ")
    head = head.split(b"\n---\n", 1)[0].rstrip(b"\n")  # no diffstat, nor the blank line
    data = head + b"\n\n" + sep + diff
    data = _FROM.sub(b"From 0 ", data)
    data = _INDEX.sub(b"index", data)
    return _HUNK.sub(b"@@", data)
