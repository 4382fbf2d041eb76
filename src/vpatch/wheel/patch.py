"""A series applied to the files a wheel ships: which of the series' files
the wheel carries (compiled code refused: an overlay cannot carry it), and
their patched bytes, made by `git apply` on copies in a temporary folder."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import gitutil
from ..errors import PatchError, WheelError, disk_error
from ..paths import safe_relpath, scratch
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
    """Extract the members the series touches into a temporary folder laid
    out like the repository, `git apply` the patches there in order, and
    collect the results. A patched file equal to the original is not
    'changed'."""
    shipped, skipped = classify(series, w)
    out = Patched(skipped=skipped)
    if not shipped:
        return out
    try:
        with scratch("vpatch-overlay-") as tmp:
            root = Path(tmp) / "tree"
            root.mkdir()
            originals: dict[str, bytes] = {}
            for f in shipped:
                if w.has(f):
                    data = w.read_checked(f)
                    originals[f] = data
                    dest = root / f
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(data)
            for patch in series.patches:
                if not any(f in shipped for f in patch.files):
                    continue
                ok, report = gitutil.apply_folder(root, patch.path, 3, shipped)
                if not ok:
                    why = gitutil.apply_reason(report)
                    raise PatchError(f"{patch.name} does not apply to {w.path.name}: {why}")
            for f in shipped:
                p = root / f
                if p.is_file():
                    data = p.read_bytes()
                    if originals.get(f) != data:
                        out.changed[f] = data
                elif f in originals:
                    out.deleted.append(f)
    except OSError as e:
        raise disk_error(e, "cannot patch the wheel's files in a temporary folder") from None
    return out
