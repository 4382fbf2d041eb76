"""A vpatch checkout: a release's source as a git repository, a baseline commit
tagged `vpatch/base-<release>`, then one commit per patch in series order.

That makes every state inspectable with plain git and makes all-or-nothing
cheap: on any failure the tree is reset to where it started. A run that is
killed cannot reset anything, so it leaves a note for the next run: while
the release's source is written into a new tree, the tree holds the marker
paths.PARTIAL (the next run empties it and starts over); while the series
is applied, .git/vpatch-applying holds the HEAD before it (the next run
resets to that HEAD, ending the killed `git am`, and applies the series
again). A person's own `git am` session has no journal and is refused. A
plain folder holding exactly the release's files (`vpatch fetch --dest`)
is checked against the release's listing (names first, then bytes;
nothing is written anywhere while it is) and made a tree in place (its
PARTIAL marker stands while it is). One
implementation of each rule on trees lives here: opening a tree (the release
of the one baseline tag HEAD is built on), refusing a dirty tree or a
`git am` in progress, locking a tree against a second run, applying a
series, rendering a tree's commits as a series. Carrying a patch onto a
tree 3-way, and its conflicts, are threeway.py's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import gitutil, lock, quilt, sources
from .errors import PatchError, TreeError, VpatchError, disk_error
from .paths import PARTIAL, empty, held, make_folder, sweep, write_atomic
from .shown import Shown
from .sources import listing

BASE_TAG = "vpatch/base-{}"
JOURNAL = "vpatch-applying"  # in .git: the HEAD before the series, while it is applied
Say = Callable[[str], None]


def quiet(_: str) -> None:
    """A `say` that says nothing."""


@dataclass
class Applied(Shown):
    """What `apply` did."""

    dest: Path
    version: str
    source: str = ""
    created: bool = False
    adopted: bool = False  # dest held the release's files (vpatch fetch --dest): made a tree
    applied: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if not self.applied and self.already:
            return [f"{self.dest}: already patched ({len(self.already)} patches); nothing to do"]
        return [f"{self.dest}: vLLM {self.version}, applied {len(self.applied)} patches"]


@dataclass
class PatchState:
    name: str
    subject: str
    applied: bool


@dataclass
class Status(Shown):
    dest: Path
    version: str
    patches: list[PatchState]
    extra: list[str]
    dirty: list[str]

    def lines(self) -> list[str]:
        out = [f"{self.dest}: vLLM {self.version}"]
        out += [f"  {'applied' if p.applied else 'not applied':11}  {p.name}" for p in self.patches]
        out += [f"  {'unknown':11}  {e}" for e in self.extra]
        if self.dirty:
            out.append(f"  uncommitted changes in {len(self.dirty)} paths")
        return out


def default_dest(version: str) -> Path:
    return Path("build") / f"vllm-{version}"


# -- rules -------------------------------------------------------------------


def locked(dest: Path) -> contextlib.AbstractContextManager[None]:
    """An exclusive lock on the destination folder itself (paths.held), so
    nothing is written outside it and two runs never interleave."""
    busy = f"another vpatch run is working on {dest}; wait for it to finish"
    return held(dest, busy, "the tree")


def refuse_dirty(repo: gitutil.Repo, hint: str = "commit or discard them first") -> None:
    """TreeError when the work tree has uncommitted changes (untracked included)."""
    changed = gitutil.dirty(repo)
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        raise TreeError(
            f"{repo.working_tree_dir} has uncommitted changes ({changed[0]}{more}); {hint}"
        )


def refuse_am(repo: gitutil.Repo) -> None:
    """A person's conflict resolution must be finished before we go on."""
    if gitutil.am_in_progress(repo):
        left = gitutil.conflicted(repo)
        hint = f" ({', '.join(left)} unresolved)" if left else ""
        raise TreeError(
            f"{repo.working_tree_dir}: git am is still in progress{hint}; resolve, "
            "`git add`, `git am --continue` (or `git am --abort`)"
        )


def open_tree(dest: Path) -> tuple[gitutil.Repo, str]:
    """(repo, release) of a vpatch tree: the release of the one baseline tag
    HEAD is built on."""
    repo = gitutil.open_repo(Path(dest))
    if repo is None:
        raise TreeError(
            f"{dest} is not a vpatch tree (no git repository); run `vpatch apply` first"
        )
    prefix = BASE_TAG.format("")
    bases = [t for t in gitutil.tags(repo, prefix) if gitutil.is_ancestor(repo, t)]
    if len(bases) != 1:
        found = "no" if not bases else f"{len(bases)}"
        raise TreeError(f"{dest}: HEAD is on {found} {prefix}* baseline tags; expected one")
    return repo, bases[0].removeprefix(prefix)


def on_base(repo: gitutil.Repo, base: str) -> list[gitutil.Commit]:
    """The commits base..HEAD; TreeError when HEAD is not built on base."""
    done = gitutil.commits(repo, base)
    if done is None:
        raise TreeError(f"{repo.working_tree_dir}: HEAD is not on top of {base}")
    return done


# -- apply / status / unapply ----------------------------------------------------


def apply(
    release: lock.Release,
    series: quilt.Series,
    dest: Path,
    source: str = "auto",
    offline: bool = False,
    remote: str | None = None,
    say: Say = quiet,
) -> Applied:
    """Make dest the patched tree of release: fetch the source into an empty
    (or new) folder, or continue a vpatch tree of the same release, or make
    a tree of a folder holding exactly the release's files (`vpatch fetch
    --dest`), then apply the series' missing patches, all or nothing. A
    folder this made is removed again when nothing could be applied; a
    folder it made a tree of is a plain folder again.

    A new tree is one pipeline: resolve the source, materialize it, commit
    the baseline, apply the series (each stage one call: sources.resolve,
    sources.materialize, gitutil.baseline, gitutil.am_each); only a tree
    that exists is checked for a killed run, a person's `git am` or edits,
    and the patches it has."""
    created = make_folder(dest, "the tree")
    result = Applied(dest, release.version, created=created)
    try:
        with locked(dest):
            repo = _open_or_create(release, dest, source, offline, remote, result, say)
            left = (
                series.patches
                if result.created
                else _left(repo, release.version, series, result, say)
            )
            _apply_patches(repo, release.version, left, result, say)
    except BaseException:
        if created and not result.applied and not result.already:
            shutil.rmtree(dest, ignore_errors=True)
        elif result.adopted and not result.applied:
            # the series failed, and was reset to the baseline: the files are
            # the fetched ones again; without .git the folder is as it was
            shutil.rmtree(dest / ".git", ignore_errors=True)
        raise
    return result


def _open_or_create(
    release: lock.Release,
    dest: Path,
    source: str,
    offline: bool,
    remote: str | None,
    result: Applied,
    say: Say,
) -> gitutil.Repo:
    tag = BASE_TAG.format(release.version)
    marker = dest / PARTIAL
    if marker.is_file():
        say(f"{dest}: a vpatch run was interrupted while making it; starting over")
        empty_folder(dest)
    if not any(dest.iterdir()):
        kind = sources.resolve(release, source)
        say(f"fetching vLLM {release.version} ({kind})")
        try:
            mark(marker)
            result.source = sources.materialize(release, kind, dest, offline, remote, say)
            message = f"vLLM {release.version} ({result.source})"  # a checkout has its own
            repo = gitutil.baseline(dest, message, tag, exclude=(PARTIAL,))
            marker.unlink()
        except OSError as e:
            empty_folder(dest)
            raise disk_error(e, f"cannot make the tree {dest}") from None
        except BaseException:
            empty_folder(dest)  # back to the empty folder we were given
            raise
        result.created = True
        return repo
    found = gitutil.open_repo(dest)
    if found is None and not (dest / ".git").exists():
        return _adopt(release, dest, source, offline, remote, result, say)
    if found is None or gitutil.tag_sha(found, tag) is None:
        raise TreeError(
            f"{dest} is not empty and is not a vpatch tree of vLLM {release.version} "
            f"(no tag {tag}); pick another --dest or remove it"
        )
    return found


def _adopt(
    release: lock.Release,
    dest: Path,
    source: str,
    offline: bool,
    remote: str | None,
    result: Applied,
    say: Say,
) -> gitutil.Repo:
    """Make a tree of a plain folder that holds exactly the release's source
    as --source gives it (what `vpatch fetch --dest` wrote): every file,
    symlink and folder of dest must be the release's (sources.listing: read
    without writing the release anywhere), with the same bytes and
    executable bit, and nothing more. Names are compared first, so a folder
    that is something else is refused at its first stray or missing name.
    Otherwise TreeError, dest untouched. The baseline commit is the one a
    fresh tree gets (same files, same message)."""
    kind = sources.resolve(release, source)
    refused = (
        f"{dest} is not empty, is not a vpatch tree, and does not hold vLLM "
        f"{release.version} as --source {source} gives it"
    )
    hint = (
        "pick another --dest or remove it (a folder `vpatch fetch --dest` filled is "
        "accepted with the same --source)"
    )
    say(f"{dest}: checking its files against vLLM {release.version} ({kind})")
    try:
        theirs = listing.entries(release, source, offline)
    except VpatchError as e:
        # a folder vpatch cannot compare is still one it will not write into
        raise TreeError(f"{refused} (it could not be checked: {e}); {hint}") from None
    try:
        why = _difference(dest, theirs)
    except OSError as e:
        raise disk_error(e, f"cannot read {dest}") from None
    if why:
        raise TreeError(f"{refused} ({why}); {hint}")
    what = sources.describe(release, kind)
    marker = dest / PARTIAL
    try:
        mark(marker)  # killed from here on: the next run starts the folder over
        message = f"vLLM {release.version} ({what})"
        repo = gitutil.baseline(dest, message, BASE_TAG.format(release.version), (PARTIAL,))
        marker.unlink()
    except BaseException:
        shutil.rmtree(dest / ".git", ignore_errors=True)  # back to the plain folder
        marker.unlink(missing_ok=True)
        raise
    result.source, result.adopted = what, True
    return repo


def _difference(dest: Path, theirs: listing.Entries) -> str:
    """The first difference between dest and the release's entries, named
    ('' when there is none). Names first, walking dest in sorted order and
    stopping at the first entry the release lacks (a stray); then the first
    the folder lacks; only then kinds, executable bits and bytes."""

    def fail(e: OSError) -> None:
        raise e

    seen = set()
    for folder, dirs, files in os.walk(dest, onerror=fail):
        dirs.sort()
        for name in sorted(dirs + files):
            rel = Path(folder, name).relative_to(dest).as_posix()
            if rel not in theirs:
                return f"{rel} is not in the release"
            seen.add(rel)
    missing = sorted(set(theirs) - seen)
    if missing:
        return f"{missing[0]} is missing"
    for rel in sorted(theirs):
        want = theirs[rel]
        mine = listing.entry(dest / rel, digest=False)
        if mine[0] != want[0] or (mine[0] == "symlink" and mine[2] != want[2]):
            return f"{rel} differs (content)"
        if mine[0] == "file" and listing.entry(dest / rel)[2] != want[2]:
            return f"{rel} differs (content)"
        if mine[1] != want[1]:
            return f"{rel} differs (mode)"
    return ""


def mark(marker: Path) -> None:
    """The PARTIAL marker, first thing in a folder vpatch is about to fill."""
    try:
        marker.write_bytes(b"")
    except OSError as e:
        raise disk_error(e, f"cannot write into {marker.parent}") from None


def empty_folder(dest: Path) -> None:
    try:
        empty(dest)
    except OSError as e:
        raise disk_error(e, f"cannot empty {dest}") from None


def _recover(repo: gitutil.Repo, say: Say) -> None:
    """Undo what a killed run left mid-series: the journal names the HEAD
    before the series (see the module docstring)."""
    git_dir = Path(repo.git_dir)
    journal = git_dir / JOURNAL
    try:
        sweep(git_dir)
        start = journal.read_text().strip()
    except FileNotFoundError:
        return
    except (OSError, UnicodeDecodeError):
        start = ""
    if not re.fullmatch(r"[0-9a-f]{40}", start):
        raise TreeError(f"{journal} is damaged; remove it, and reset the tree to its baseline")
    say(
        f"{repo.working_tree_dir}: a vpatch run was interrupted while applying the series; "
        f"back to {start[:10]}, then again"
    )
    gitutil.recover(repo, start)
    journal.unlink()


def _applied_prefix(repo: gitutil.Repo, version: str, series: quilt.Series) -> list[gitutil.Commit]:
    """The commits on top of the baseline, which must be the series' first ones."""
    done = on_base(repo, BASE_TAG.format(version))
    for i, c in enumerate(done):
        if i >= len(series.patches) or c.subject != series.patches[i].subject:
            raise TreeError(
                f"{repo.working_tree_dir} has a commit the series does not know: "
                f"{c.sha[:10]} {c.subject!r}; remove it, or export it into the series"
            )
    return done


def _left(
    repo: gitutil.Repo, version: str, series: quilt.Series, result: Applied, say: Say
) -> list[quilt.Patch]:
    """The patches an existing tree lacks, after ending a killed run; a
    person's `git am`, uncommitted changes or a commit not the series' are
    refused."""
    _recover(repo, say)
    refuse_am(repo)
    refuse_dirty(repo)
    done = _applied_prefix(repo, version, series)
    result.already = [p.name for p in series.patches[: len(done)]]
    return series.patches[len(done) :]


def _apply_patches(
    repo: gitutil.Repo, version: str, left: list[quilt.Patch], result: Applied, say: Say
) -> None:
    """`left` applied on HEAD, all or nothing: the journal names HEAD while
    they are (see the module docstring)."""
    if not left:
        return
    start = gitutil.head(repo)
    assert start is not None
    journal = Path(repo.git_dir) / JOURNAL
    try:
        write_atomic(journal, f"{start}\n".encode())
    except OSError as e:
        raise disk_error(e, "cannot write into the tree's .git") from None
    try:
        failed = gitutil.am_each(repo, [(p.name, p.path, p.date) for p in left], say)
        if failed is not None:
            gitutil.reset_hard(repo, "HEAD")
            raise PatchError(_why(repo, left[failed], version))
        result.applied = [p.name for p in left]
    except BaseException:
        gitutil.reset_hard(repo, start)  # all or nothing, Ctrl-C included
        result.applied.clear()
        journal.unlink(missing_ok=True)  # kept if the reset failed: the next run resets
        raise
    journal.unlink()


def _why(repo: gitutil.Repo, patch: quilt.Patch, version: str) -> str:
    """Name the file and hunk that failed, from `git apply --check`."""
    err = gitutil.apply_check(repo, patch.path)
    where = f"{patch.name} does not apply to vLLM {version}"
    tail = "; the tree was left as it was"
    m = re.search(r"patch failed: (.+):(\d+)", err)
    if m:
        path, line = m.group(1), int(m.group(2))
        hunks = [h for f in patch.diff if f.path == path for h in f]
        for n, h in enumerate(hunks, 1):
            if h.source_start == line:
                head = str(h).splitlines()[0]  # "@@ -a,b +c,d @@ context"
                return f"{where}: {path} hunk #{n} ({head}) failed{tail}"
        return f"{where}: {path} at line {line}{tail}"
    m = re.search(r"error: (.+?): (No such file or directory|does not exist in index)", err)
    if m:
        return f"{where}: {m.group(1)} is missing{tail}"
    last = err.splitlines()[-1] if err else "git am failed"
    return f"{where}: {last}{tail}"


def status(dest: Path, repo: gitutil.Repo, version: str, series: quilt.Series) -> Status:
    """Which of the series' patches the tree (open_tree's) has applied."""
    done = gitutil.commits(repo, BASE_TAG.format(version)) or []
    subjects = [c.subject for c in done]
    states = [
        PatchState(p.name, p.subject, i < len(subjects) and subjects[i] == p.subject)
        for i, p in enumerate(series.patches)
    ]
    known = {p.subject for p in series.patches}
    extra = [f"{c.sha[:10]} {c.subject}" for c in done if c.subject not in known]
    return Status(Path(dest), version, states, extra, gitutil.dirty(repo))


def unapply(
    dest: Path, repo: gitutil.Repo, version: str, series: quilt.Series, discard: bool = False
) -> int:
    """Back to the baseline (open_tree's repo and release); the number of
    commits removed. A commit that is not the series' own (foreign) would be
    lost: TreeError naming it, unless `discard`."""
    with locked(dest):
        refuse_am(repo)
        refuse_dirty(repo)
        base = BASE_TAG.format(version)
        done = on_base(repo, base)
        mine = foreign(repo, done, series)
        if mine and not discard:
            c, at, more = mine[0], len(done) - len(mine), len(mine) - 1
            amended = at < len(series.patches) and series.patches[at].subject == c.subject
            what = f"{c.sha[:10]} {c.subject!r}" + (", changed since it was applied" * amended)
            raise TreeError(
                f"{dest} has a commit that is not the series' own: {what}"
                f"{f' and {more} more' if more else ''}; unapply would drop it: "
                f"`vpatch export {dest}` it first, or run again with --discard-commits"
            )
        gitutil.reset_hard(repo, base)
    return len(done)


def foreign(
    repo: gitutil.Repo, done: list[gitutil.Commit], series: quilt.Series
) -> list[gitutil.Commit]:
    """The commits of base..HEAD (done) from the first that is not the
    series' patch at its place: another subject, or the subject of the patch
    with another change (its commit amended, and not exported yet)."""
    for i, c in enumerate(done):
        if i >= len(series.patches) or c.subject != series.patches[i].subject:
            return done[i:]
        try:
            theirs = series.patches[i].path.read_bytes()
        except OSError as e:
            raise disk_error(e, "cannot read a patch") from None
        if gitutil.patch_id(gitutil.format_patch(repo, c.sha)) != gitutil.patch_id(theirs):
            return done[i:]
    return []


# -- series out of a tree, patches into one ------------------------------------------


def render(repo: gitutil.Repo, base: str) -> dict[str, bytes]:
    """{file name: bytes} of the commits in base..HEAD, in order, plus `series`.
    The bytes derive from the commits alone (gitutil.format_patch is hermetic)."""
    out: dict[str, bytes] = {}
    for i, c in enumerate(on_base(repo, base), 1):
        data = gitutil.format_patch(repo, c.sha)
        if b"\ndiff --git " not in data:
            raise PatchError(
                f"commit {c.sha[:10]} {c.subject!r} changes no file; drop it and export again"
            )
        out[quilt.file_name(i, c.subject)] = data
    out["series"] = "".join(f"{n}\n" for n in out).encode()
    return out
