"""A series applied to the files a wheel ships: which of the series' files
the wheel carries (compiled code refused: an overlay cannot carry it), and
their patched bytes (patchfiles.apply: `git apply` on copies in a
temporary folder)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import patchfiles
from ..errors import WheelError
from ..paths import safe_relpath
from ..quilt import Series
from .file import WheelFile

# Paths a series may change that an overlay cannot carry: compiled code.
_COMPILED = re.compile(r"^(csrc/|cmake/)|(^|/)CMakeLists\.txt$|\.(cu|cuh|c|cc|cpp|cxx|h|hpp)$")


@dataclass
class Patched:
    """What a series does to a wheel: `changed` maps member paths to their
    patched bytes (new files included), `deleted` lists members the series
    removes, `skipped` the series files no wheel ships (tests, docs)."""

    changed: dict[str, bytes] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def classify(series: Series, w: WheelFile) -> tuple[list[str], list[str]]:
    """(shipped, skipped) series files; compiled code raises WheelError."""
    packages = w.packages()
    shipped: list[str] = []
    skipped: list[str] = []
    for patch in series.patches:
        for f in patch.files:
            safe_relpath(f, f"patch {patch.name}")
            if f in shipped or f in skipped:
                continue
            if w.has(f) or f.split("/", 1)[0] in packages:
                shipped.append(f)
            elif _COMPILED.search(f):
                raise WheelError(
                    f"patch {patch.name} changes {f} (compiled code): an overlay cannot "
                    "carry it; use --mode source"
                )
            else:
                skipped.append(f)
    return shipped, skipped


def apply_series(w: WheelFile, series: Series) -> Patched:
    """The series applied to the members it touches (patchfiles.apply); a
    patched file equal to the original is not 'changed'."""
    shipped, skipped = classify(series, w)
    out = Patched(skipped=skipped)
    if not shipped:
        return out
    originals = {f: w.read_checked(f) for f in shipped if w.has(f)}
    patched = patchfiles.apply(series, originals, shipped, w.path.name)
    out.changed = {f: data for f, data in patched.items() if originals.get(f) != data}
    out.deleted = [f for f in shipped if f in originals and f not in patched]
    return out
