"""A vLLM release as one type, and a span of releases as one type: what the
inner suite, its plugins and the tier program compare releases with.

A release is packaging's ``Version`` (vLLM and vpatch both require
packaging, so every python of the tier has it), made by ``version`` from a
release as the lock spells it (``X.Y.Z``) or as vLLM reports itself
(``X.Y.Z+cpu``: the build label is not part of the release).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version


def version(release: str | Version) -> Version:
    """``release`` as it compares: ``X.Y.Z+cpu`` as ``X.Y.Z``."""
    return Version(Version(str(release)).base_version)


@dataclass(frozen=True)
class Span:
    """The releases from ``first`` to ``last``, both included."""

    first: str
    last: str

    def covers(self, release: str | Version) -> bool:
        return version(self.first) <= version(release) <= version(self.last)

    def __str__(self) -> str:
        return self.first if self.first == self.last else f"{self.first}-{self.last}"
