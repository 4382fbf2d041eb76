"""The apply / unapply / status engine.

A patched tree is a git repository: a baseline commit of the release's
source tagged `vpatch/base-<release>`, then one commit per patch in series
order. That makes every state inspectable with plain git, and makes
all-or-nothing cheap: on any failure the tree is reset to where it started.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import gitutil, lock, series, sources
from .errors import ConfigError, PatchError, TreeError, VpatchError
from .paths import empty

BASE_TAG = "vpatch/base-{}"


@dataclass
class Result:
    dest: Path
    version: str
    source: str = ""
    created: bool = False
    applied: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)


@dataclass
class PatchState:
    name: str
    subject: str
    applied: bool


@dataclass
class Status:
    dest: Path
    version: str
    patches: list[PatchState]
    extra: list[str]
    dirty: list[str]


def default_dest(version: str) -> Path:
    return Path("build") / f"vllm-{version}"


@contextlib.contextmanager
def tree_lock(dest: Path) -> Iterator[None]:
    """An exclusive lock on the destination folder itself (flock on its
    descriptor), so nothing is written outside it and two runs never interleave."""
    fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise TreeError(
                    f"another vpatch run is working on {dest}; wait for it to finish"
                ) from None
            raise
        yield
    finally:
        os.close(fd)


def apply(
    version: str | None = None,
    dest: Path | None = None,
    source: str = "auto",
    series_dir: Path | None = None,
    offline: bool = False,
    remote: str | None = None,
    pins: lock.Lock | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Result:
    pins = pins or lock.load()
    release = pins.get(version)
    if series_dir is None and not release.series:
        raise ConfigError(
            f"vLLM {release.version} needs no patches (status {release.status}: it has the "
            f"EAGLE-3 changes itself); patched releases: {', '.join(pins.versions('patched'))}"
        )
    todo = series.load(series_dir or release.series_dir())
    dest = Path(dest or default_dest(release.version))
    created = not dest.exists()
    if dest.exists() and not dest.is_dir():
        raise TreeError(f"{dest} exists and is not a folder")
    dest.mkdir(parents=True, exist_ok=True)
    result = Result(dest, release.version, created=created)
    try:
        with tree_lock(dest):
            repo = _open_or_create(release, dest, source, offline, remote, result, say)
            _apply_series(repo, release.version, todo, result, say)
    except BaseException:
        if created and not result.applied and not result.already:
            shutil.rmtree(dest, ignore_errors=True)
        raise
    return result


def _open_or_create(release, dest, source, offline, remote, result, say):
    tag = BASE_TAG.format(release.version)
    if not any(dest.iterdir()):
        say(f"fetching vLLM {release.version} ({sources.resolve(release, source)})")
        try:
            result.source = sources.materialize(release, source, dest, offline, remote)
            repo = gitutil.open_repo(dest) or gitutil.init(dest)
            if gitutil.head(repo) is None:  # not a git checkout: record the baseline
                gitutil.commit_all(repo, f"vLLM {release.version} ({result.source})")
            gitutil.tag(repo, tag)
        except BaseException:
            empty(dest)  # back to the empty folder we were given
            raise
        result.created = True
        return repo
    repo = gitutil.open_repo(dest)
    if repo is None or gitutil.tag_sha(repo, tag) is None:
        raise TreeError(
            f"{dest} is not empty and is not a vpatch tree of vLLM {release.version} "
            f"(no tag {tag}); pick another --dest or remove it"
        )
    return repo


def _applied_prefix(repo, version: str, todo: series.Series) -> list[gitutil.Commit]:
    """The commits on top of the baseline, which must be the series' first ones."""
    base = BASE_TAG.format(version)
    done = gitutil.commits(repo, base)
    if done is None:
        raise TreeError(f"{repo.working_tree_dir}: HEAD is not on top of {base}")
    for i, c in enumerate(done):
        if i >= len(todo.patches) or c.subject != todo.patches[i].subject:
            raise TreeError(
                f"{repo.working_tree_dir} has a commit the series does not know: "
                f"{c.sha[:10]} {c.subject!r}; remove it, or export it into the series"
            )
    return done


def _refuse_dirty(repo) -> None:
    changed = gitutil.dirty(repo)
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        raise TreeError(
            f"{repo.working_tree_dir} has uncommitted changes ({changed[0]}{more}); "
            "commit or discard them first"
        )


def _apply_series(repo, version: str, todo: series.Series, result: Result, say) -> None:
    _refuse_dirty(repo)
    done = _applied_prefix(repo, version, todo)
    result.already = [p.name for p in todo.patches[: len(done)]]
    start = gitutil.head(repo)
    try:
        for patch in todo.patches[len(done) :]:
            say(f"applying {patch.name}")
            try:
                gitutil.am(repo, patch.path)
            except VpatchError:
                gitutil.reset_hard(repo, "HEAD")
                raise PatchError(_why(repo, patch, version)) from None
            result.applied.append(patch.name)
    except BaseException:
        gitutil.reset_hard(repo, start)  # all or nothing
        result.applied.clear()
        raise


def _why(repo, patch: series.Patch, version: str) -> str:
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


def _tree(dest: Path):
    repo = gitutil.open_repo(Path(dest))
    if repo is None:
        raise TreeError(
            f"{dest} is not a vpatch tree (no git repository); run `vpatch apply` first"
        )
    tags = [t.name for t in repo.tags if t.name.startswith("vpatch/base-")]
    if not tags:
        raise TreeError(f"{dest} is not a vpatch tree (no vpatch/base-* tag)")
    return repo, tags[0].removeprefix("vpatch/base-")


def status(dest: Path, series_dir: Path | None = None, pins: lock.Lock | None = None) -> Status:
    repo, version = _tree(dest)
    pins = pins or lock.load()
    todo = series.load(series_dir or pins.get(version).series_dir())
    base = BASE_TAG.format(version)
    done = gitutil.commits(repo, base) or []
    subjects = [c.subject for c in done]
    states = []
    for i, p in enumerate(todo.patches):
        states.append(PatchState(p.name, p.subject, i < len(subjects) and subjects[i] == p.subject))
    known = {p.subject for p in todo.patches}
    extra = [f"{c.sha[:10]} {c.subject}" for c in done if c.subject not in known]
    return Status(Path(dest), version, states, extra, gitutil.dirty(repo))


def unapply(dest: Path) -> tuple[str, int]:
    """Back to the baseline; returns (version, number of commits removed)."""
    dest = Path(dest)
    repo, version = _tree(dest)
    with tree_lock(dest):
        _refuse_dirty(repo)
        base = BASE_TAG.format(version)
        n = len(gitutil.commits(repo, base) or [])
        gitutil.reset_hard(repo, base)
    return version, n
