"""The vLLM releases the package index has beyond the lock: what `vpatch
releases` lists and a scheduled carry takes, oldest first.

The index is pip's (index.py: PIP_INDEX_URL, `pip config`, pip's default),
read through its JSON API. A version counts when the project's page lists a
file of it that is not yanked (PEP 592: pip skips yanked files too) and it
is a final release: no pre-release (rc, a, b), no dev release, no local
version (+cu129: a build of another release). A post-release (.post1) is a
release pip installs, so it counts. A file whose name is neither a
wheel's nor an sdist's, or names another project, is skipped, as pip skips
it. "Beyond" is newer than the newest release VERSIONS.lock pins: a gap
below it is not listed (`vpatch lock --refresh` and `vpatch carry` take
any release by name). Only what `vpatch carry` takes as the index spells
it is proposed (lock.is_release: X.Y.Z or X.Y.Z.postN, no epoch, short)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from .. import lock
from ..lock import KINDS, Lock
from ..shown import Shown
from . import index

# the project whose releases a carry pins: the official wheel's, which it needs
PROJECT = KINDS["wheel"]


@dataclass(frozen=True)
class Beyond(Shown):
    """What `vpatch releases` lists: the newest release the lock pins, the
    releases beyond it (beyond()), each with the carry that takes it."""

    newest: str
    new: list[str]

    @property
    def carries(self) -> list[str]:
        return [f"vpatch carry {v}" for v in self.new]

    def to_json(self) -> dict[str, Any]:
        return {"newest_pinned": self.newest, "new": self.new, "carry": self.carries}

    def lines(self) -> list[str]:
        pinned = f"VERSIONS.lock pins vLLM up to {self.newest}"
        if not self.new:
            return [f"up to date: {pinned}; the package index has no newer"]
        them = "1 newer release" if len(self.new) == 1 else f"{len(self.new)} newer releases"
        return [
            f"{pinned}; the package index has {them}. Carry one at a time, oldest first, "
            "each landed before the next:",
            *(f"  {c}" for c in self.carries),
        ]


def is_release(v: Version) -> bool:
    """A final release, or a post-release of one (the module docstring).
    packaging's is_prerelease is true of rc, a, b and dev releases alike."""
    return not (v.is_prerelease or v.local)


def version_of(filename: str, project: str) -> Version | None:
    """The version of a wheel's or sdist's file of `project`; None for any
    other file (as pip, which skips a link it cannot name)."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
    except ValueError:  # InvalidWheelFilename, InvalidSdistFilename, InvalidVersion
        return None
    return version if name == canonicalize_name(project) else None


def released(project: str = PROJECT) -> list[Version]:
    """The project's releases on the index, oldest first."""
    found = set()
    for f in index.files(project).values():
        v = None if f.yanked else version_of(f.filename, project)
        if v is not None and is_release(v):
            found.add(v)
    return sorted(found)


def beyond(pins: Lock) -> list[str]:
    """The releases newer than the newest the lock pins, oldest first: the
    order to carry them in, one at a time. Only a version `vpatch carry`
    takes as it is spelled (lock.is_release, carry's own parser: X.Y.Z or
    X.Y.Z.postN, no epoch, short) is proposed; another is none vLLM ships."""
    pinned = pins.versions()  # oldest first
    newest = Version(pinned[-1]) if pinned else None
    found = [str(v) for v in released() if newest is None or v > newest]
    return [v for v in found if lock.is_release(v)]
