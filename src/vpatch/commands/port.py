"""`vpatch port FROM TO`: carry a release's series to another release.

The work tree (build/port-TO) is one git repository holding both releases:
FROM's baseline (tag vpatch/from-FROM) with FROM's series applied on branch
from-FROM, and TO's baseline as an unrelated root commit (tag
vpatch/base-TO) with the ported patches on branch port-TO. Each FROM patch
goes onto TO with `git am --3way`: the patch's index lines name FROM's blobs,
which the repository has, so git can merge where the text moved or changed.

FROM's baseline is tagged vpatch/from-*, not vpatch/base-*, so the work tree
is an ordinary vpatch tree of TO (`vpatch status`, `vpatch export` work).

Per patch: `clean` (applied as is), `merged` (needed the 3-way merge),
`dropped` (TO has it already: its probe holds, or the merge left nothing to
change) or `conflict`. On a conflict the `git am` session is left in the
work tree with every remaining patch queued, for a person to resolve and
`git am --continue`; `vpatch port FROM TO --continue` then exports.

The ported patches keep FROM's messages byte for byte (Last-Update
included): a port changes where the change applies, not what it is, and
this keeps ports reproducible. Whoever changes a patch's content bumps it.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import gitutil, lock, probes, resources, series, sources
from .. import tree as trees
from ..errors import PatchError, TreeError
from ..sources.cache import Say, quiet
from ..sources.refresh import resolve

FROM_TAG = "vpatch/from-{}"


@dataclass
class Ported:
    from_version: str
    to_version: str
    work: Path
    status: dict[str, str] = field(default_factory=dict)  # patch name -> status
    unresolved: list[str] = field(default_factory=list)  # files in conflict
    into: Path | None = None  # the series folder written
    names: list[str] = field(default_factory=list)  # its patches

    @property
    def conflict(self) -> str | None:
        return next((n for n, s in self.status.items() if s == "conflict"), None)


def default_work(to_version: str) -> Path:
    return Path("build") / f"port-{to_version}"


def port(
    from_version: str,
    to_version: str,
    *,
    pins: lock.Lock | None = None,
    work: Path | None = None,
    into: Path | None = None,
    from_source: str = "auto",
    to_source: str = "auto",
    meta_path: Path | None = None,
    offline: bool = False,
    keep: bool = False,
    say: Say = quiet,
) -> Ported:
    """Port FROM's series to TO. Returns the report; on a conflict the work
    tree is left as described above and nothing is exported."""
    if pins is None:
        resources.writable("vpatch port")
        pins = lock.load()
    src = pins.get(from_version)
    dst = resolve(pins, to_version, offline)
    todo = series.load(pins.series_dir(src))
    work = Path(work or default_work(dst.version))
    if work.exists() and not work.is_dir():
        raise TreeError(f"{work} exists and is not a folder; pick another --work")
    if work.exists() and any(work.iterdir()):
        raise TreeError(f"{work} exists; remove it, or finish a port there with --continue")
    report = Ported(src.version, dst.version, work)
    created = not work.exists()
    work.mkdir(parents=True, exist_ok=True)
    try:
        repo = gitutil.init(work)
        say(f"fetching vLLM {src.version} and {dst.version}")
        base_from = _commit_release(repo, src, from_source, offline, say)
        base_to = _commit_release(repo, dst, to_source, offline, say)
        gitutil.tag(repo, FROM_TAG.format(src.version), base_from)
        gitutil.switch(repo, f"from-{src.version}", base_from)
        for p in todo.patches:  # FROM's own series must apply to FROM
            gitutil.am(repo, p.path)
        gitutil.tag(repo, trees.BASE_TAG.format(dst.version), base_to)
        gitutil.switch(repo, f"port-{dst.version}", base_to)
        checks = probes.load(meta_path or pins.patches_toml)
        have = probes.folder_files(work, probes.patterns(checks))
        for i, p in enumerate(todo.patches):
            report.status[p.name] = _carry(repo, p, todo.patches[i + 1 :], checks, have)
            say(f"{p.name}: {report.status[p.name]}")
            if report.status[p.name] == "conflict":
                report.unresolved = gitutil.conflicted(repo)
                return report
    except BaseException:
        _remove(work, created)
        raise
    return _finish(report, repo, pins, dst, into, keep)


def _remove(work: Path, created: bool) -> None:
    """Leave no trace: remove the work tree (a folder given empty stays)."""
    if created:
        shutil.rmtree(work, ignore_errors=True)
    else:
        for p in work.iterdir():
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


def _commit_release(
    repo: gitutil.Repo, release: lock.Release, source: str, offline: bool, say: Say
) -> str:
    with tempfile.TemporaryDirectory(prefix="vpatch-port-") as tmp:
        what = sources.materialize(release, source, Path(tmp), offline, say=say)
        return gitutil.commit_folder(repo, Path(tmp), f"vLLM {release.version} ({what})")


def _carry(
    repo: gitutil.Repo,
    patch: series.Patch,
    rest: list[series.Patch],
    checks: probes.Probes,
    have: dict[str, str],
) -> str:
    if probes.holds(checks.get(patch.key, []), have):
        return "dropped"
    return trees.carry(repo, patch, rest)


def resume(
    from_version: str,
    to_version: str,
    *,
    pins: lock.Lock | None = None,
    work: Path | None = None,
    into: Path | None = None,
    keep: bool = False,
) -> Ported:
    """Finish a port whose conflicts a person resolved in the work tree."""
    if pins is None:
        resources.writable("vpatch port")
        pins = lock.load()
    src = pins.get(from_version)
    work = Path(work or default_work(to_version.removeprefix("v")))
    repo = gitutil.open_repo(work)
    if repo is None:
        raise TreeError(f"{work} holds no port; run `vpatch port {from_version} {to_version}`")
    trees.refuse_am(repo)
    dst = resolve(pins, to_version)
    done = {c.subject for c in trees.on_base(repo, trees.BASE_TAG.format(dst.version))}
    todo = series.load(pins.series_dir(src)).patches
    report = Ported(src.version, dst.version, work)
    report.status = {p.name: "ported" if p.subject in done else "dropped" for p in todo}
    return _finish(report, repo, pins, dst, into, keep)


def _finish(
    report: Ported,
    repo: gitutil.Repo,
    pins: lock.Lock,
    dst: lock.Release,
    into: Path | None,
    keep: bool,
) -> Ported:
    if not any(s != "dropped" for s in report.status.values()):
        if not keep:
            shutil.rmtree(report.work, ignore_errors=True)
        raise PatchError(
            f"every patch of {report.from_version} is already in {dst.version}; nothing to port"
        )
    into = Path(into or pins.series_dir(dst))
    trees.refuse_am(repo)
    trees.refuse_dirty(repo)
    files = trees.render(repo, trees.BASE_TAG.format(dst.version))
    series.write(into, files)
    report.into, report.names = into, [n for n in files if n != "series"]
    if dst.status == "unpinned" or not dst.series:
        # A new release is pinned as patched (the whole EAGLE-3 series). An
        # upstream release that gets a series has EAGLE-3 itself and our fixes
        # on top: upstream-fix. Any other keeps its status: making a release
        # `patched` moves the default release of every command, a person's call.
        status = {"unpinned": "patched", "upstream": "upstream-fix"}.get(dst.status, dst.status)
        try:
            rel = into.resolve().relative_to(pins.root.resolve()).as_posix()
        except ValueError:
            # outside the checkout: absolute, as the lock reads a relative
            # series path against its own folder, not the caller's
            rel = str(into.resolve())
        lock.save(pins.with_release(replace(dst, status=status, series=rel)))
    if not keep:
        shutil.rmtree(report.work, ignore_errors=True)
    return report
