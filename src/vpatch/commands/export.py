"""`vpatch export`: write a patched tree's commits back as patches.

The commits on top of the tree's baseline (tag vpatch/base-<release>) are
rendered with `git format-patch` (hermetic: the same commits give the same
bytes on any machine and git version, whoever made them and whenever).
Into the patch set (the default; patchset_write.record): each commit's slug is
the key of its subject, and only what vLLM <release> gets changes: a
variant that serves it keeps its file when the change is the same (hunk
positions and blob ids aside), is rewritten when the release is the one it
was exported from, and otherwise the release starts a variant of its own.
With `--into DIR`: a plain series folder (NNNN-<slug>.patch and `series`),
new, empty, or one vpatch wrote, as `vpatch series --out` (quilt.write).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import checkout, lock, patchset_write, quilt, resources
from ..errors import ConfigError, TreeError
from ..shown import Shown


@dataclass
class Exported(Shown):
    dir: Path
    version: str
    names: list[str]
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    variants: dict[str, str] = field(default_factory=dict)  # slug -> what record() did
    rendered: bool = False  # `vpatch series`: a release's series, not a tree's commits

    def lines(self) -> list[str]:
        head = f"{self.dir}: {len(self.names)} patches for vLLM {self.version}"
        if self.rendered:
            return [f"{head} (series)"]
        out = [f"  {what:9}  {slug}" for slug, what in self.variants.items()]
        return [*out, f"{head} ({len(self.written)} files written, {len(self.removed)} removed)"]


def export(tree: Path, into: Path | None = None, *, pins: lock.Lock) -> Exported:
    """Write the tree's patches into the patch set, or into folder `into`."""
    repo, version = checkout.open_tree(tree)
    checkout.refuse_am(repo)
    checkout.refuse_dirty(repo)
    files = checkout.render(repo, checkout.BASE_TAG.format(version))
    names = [n for n in files if n != "series"]
    if into is not None:
        done = Exported(Path(into), version, names)
        done.written, done.removed = quilt.write(Path(into), files)
        return done
    resources.writable("vpatch export", pins.root)
    rec = patchset_write.record(
        pins.patchset, pins.versions(), version, [(quilt.slug(n), files[n]) for n in names]
    )
    done = Exported(pins.patchset.dir, version, names, variants=rec.done)
    done.written = [s for s, what in rec.done.items() if what != "unchanged"]
    return done


def render(version: str | None, out: Path, *, pins: lock.Lock) -> Exported:
    """`vpatch series`: release `version`'s series as plain files in `out`
    (NNNN-<slug>.patch and `series`, for `git am`, quilt or `patch -p1`),
    which must be new, empty, or a series folder vpatch wrote (quilt.write)."""
    release = pins.get(version)
    series = pins.series(release)
    if series is None:
        raise ConfigError(
            f"vLLM {release.version} carries no series (status {release.status}); releases "
            f"with one: {', '.join(pins.with_series())}"
        )
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise TreeError(f"{out} exists and is not a folder")
    files = series.files_out()
    done = Exported(out, release.version, [n for n in files if n != "series"], rendered=True)
    done.written, done.removed = quilt.write(out, files)
    return done
