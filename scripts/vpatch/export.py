"""`vpatch export`: write the series of a patched tree from its commits.

The commits on top of the tree's baseline (tag vpatch/base-<release>) become
NNNN-<slug of subject>.patch files and a `series` file. The bytes derive
from the commits alone (gitutil.format_patch is hermetic), so the same
commits give the same files on any machine and git version, whoever made
them and whenever.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import gitutil, lock, series
from .apply import BASE_TAG
from .errors import PatchError, TreeError


@dataclass
class Exported:
    dir: Path
    version: str
    names: list[str]
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def open_tree(tree: Path):
    """(repo, release) of a vpatch tree: the release of the one baseline tag
    HEAD is built on."""
    repo = gitutil.open_repo(Path(tree))
    if repo is None:
        raise TreeError(f"{tree} is not a vpatch tree (no git repository); run `vpatch apply`")
    prefix = BASE_TAG.format("")
    bases = [t for t in gitutil.tags(repo, prefix) if gitutil.is_ancestor(repo, t)]
    if len(bases) != 1:
        found = "no" if not bases else f"{len(bases)}"
        raise TreeError(f"{tree}: HEAD is on {found} {prefix}* baseline tags; expected one")
    return repo, bases[0].removeprefix(prefix)


def render(repo, base: str) -> dict[str, bytes]:
    """{file name: bytes} of the commits in base..HEAD, in order, plus `series`."""
    commits = gitutil.commits(repo, base)
    if commits is None:
        raise TreeError(f"{repo.working_tree_dir}: HEAD is not on top of {base}")
    out: dict[str, bytes] = {}
    for i, c in enumerate(commits, 1):
        data = gitutil.format_patch(repo, c.sha)
        if b"\ndiff --git " not in data:
            raise PatchError(
                f"commit {c.sha[:10]} {c.subject!r} changes no file; drop it and export again"
            )
        out[f"{i:04d}-{series.slugify(c.subject)}.patch"] = data
    out["series"] = "".join(f"{n}\n" for n in out).encode()
    return out


def export(tree: Path, into: Path | None = None, pins: lock.Lock | None = None) -> Exported:
    repo, version = open_tree(tree)
    if gitutil.am_in_progress(repo):
        raise TreeError(f"{tree}: a `git am` is in progress; finish it (git am --continue)")
    changed = gitutil.dirty(repo)
    if changed:
        raise TreeError(
            f"{tree} has uncommitted changes ({changed[0]}); commit or discard them first"
        )
    if into is None:
        pins = pins or lock.load()
        rel = pins.releases.get(version)
        into = rel.series_dir() if rel and rel.series else lock.ROOT / "patches" / version
    into = Path(into)
    files = render(repo, BASE_TAG.format(version))
    done = Exported(into, version, [n for n in files if n != "series"])
    into.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        path = into / name
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
            done.written.append(name)
    for stale in sorted(into.glob("*.patch")):
        if stale.name not in files:
            stale.unlink()
            done.removed.append(stale.name)
    return done
