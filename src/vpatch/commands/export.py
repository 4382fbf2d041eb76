"""`vpatch export`: write the series of a patched tree from its commits.

The commits on top of the tree's baseline (tag vpatch/base-<release>) become
NNNN-<key of subject>.patch files and a `series` file. The bytes derive
from the commits alone (gitutil.format_patch is hermetic), so the same
commits give the same files on any machine and git version, whoever made
them and whenever.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import lock, resources, series
from .. import tree as trees


@dataclass
class Exported:
    dir: Path
    version: str
    names: list[str]
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def export(tree: Path, into: Path | None = None, pins: lock.Lock | None = None) -> Exported:
    """Write the tree's series into `into` (default: the release's series
    folder in the checkout)."""
    repo, version = trees.open_tree(tree)
    trees.refuse_am(repo)
    trees.refuse_dirty(repo)
    if into is None:
        if pins is None:
            resources.writable("vpatch export")
            pins = lock.load()
        rel = pins.releases.get(version)
        into = pins.series_dir(rel) if rel else pins.root / "patches" / version
    files = trees.render(repo, trees.BASE_TAG.format(version))
    done = Exported(Path(into), version, [n for n in files if n != "series"])
    done.written, done.removed = series.write(Path(into), files)
    return done
