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
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import gitutil, lock, probes, series, sources
from .apply import BASE_TAG
from .errors import PatchError, TreeError
from .export import Exported, export
from .matrix import resolve

FROM_TAG = "vpatch/from-{}"


@dataclass
class Report:
    from_version: str
    to_version: str
    work: Path
    status: dict[str, str] = field(default_factory=dict)  # patch name -> status
    unresolved: list[str] = field(default_factory=list)  # files in conflict
    exported: Exported | None = None

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
    say: Callable[[str], None] = lambda _: None,
) -> Report:
    """Port FROM's series to TO. Returns the report; on a conflict the work
    tree is left as described above and nothing is exported."""
    pins = pins or lock.load()
    src = pins.get(from_version)
    dst = resolve(pins, to_version, offline)
    todo = series.load(src.series_dir(pins.path.parent))
    work = Path(work or default_work(dst.version))
    if work.exists() and any(work.iterdir()):
        raise TreeError(f"{work} exists; remove it, or finish a port there with --continue")
    report = Report(src.version, dst.version, work)
    work.mkdir(parents=True, exist_ok=True)
    try:
        repo = gitutil.init(work)
        say(f"fetching vLLM {src.version} and {dst.version}")
        base_from = _commit_release(repo, src, from_source, offline)
        base_to = _commit_release(repo, dst, to_source, offline)
        gitutil.tag(repo, FROM_TAG.format(src.version), base_from)
        gitutil.switch(repo, f"from-{src.version}", base_from)
        for p in todo.patches:  # FROM's own series must apply to FROM
            gitutil.am(repo, p.path)
        gitutil.tag(repo, BASE_TAG.format(dst.version), base_to)
        gitutil.switch(repo, f"port-{dst.version}", base_to)
        checks = probes.load(meta_path or pins.path.parent / "patches" / probes.PATCHES_TOML.name)
        have = probes.folder_files(work, probes.patterns(checks))
        for i, p in enumerate(todo.patches):
            report.status[p.name] = _carry(repo, p, todo.patches[i + 1 :], checks, have)
            say(f"{p.name}: {report.status[p.name]}")
            if report.status[p.name] == "conflict":
                report.unresolved = gitutil.conflicted(repo)
                return report
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return _finish(report, repo, pins, dst, into, keep)


def _commit_release(repo, release: lock.Release, source: str, offline: bool) -> str:
    with tempfile.TemporaryDirectory(prefix="vpatch-port-") as tmp:
        what = sources.materialize(release, source, Path(tmp), offline)
        return gitutil.commit_folder(repo, Path(tmp), f"vLLM {release.version} ({what})")


def _carry(repo, patch: series.Patch, rest, checks: probes.Probes, have) -> str:
    if probes.holds(checks.get(probes.key(patch.name), []), have):
        return "dropped"
    return carry(repo, patch, rest)


def carry(repo, patch: series.Patch, rest: list[series.Patch]) -> str:
    """`git am --3way` of patch onto HEAD: clean, merged, dropped (it left
    nothing to change) or conflict (the am session is left with patch and
    rest queued). The repository must hold the blobs the patch's index
    lines name."""
    before = gitutil.head(repo)
    ok, out = gitutil.am_3way(repo, [patch.path])
    merged = "3-way merge" in out  # git fell back from applying the text as is
    if not ok and gitutil.resolve_insertions(repo):
        # both sides added lines at one place (two appends to a list): keep both
        ok, _ = gitutil.am_continue(repo, patch.date or gitutil.EPOCH)
    if not ok:
        # queue this patch and every later one, so `git am --continue` does it all
        gitutil.reset_hard(repo, before)
        gitutil.am_3way(repo, [patch.path, *(p.path for p in rest)])
        return "conflict"
    if gitutil.head(repo) == before:
        return "dropped"  # "No changes -- Patch already applied."
    return "merged" if merged else "clean"


def refuse_am_in_progress(repo, tree: Path) -> None:
    """A person's conflict resolution must be finished before we go on."""
    if gitutil.am_in_progress(repo):
        left = gitutil.conflicted(repo)
        hint = f" ({', '.join(left)} unresolved)" if left else ""
        raise TreeError(
            f"{tree}: git am is still in progress{hint}; resolve, `git add`, `git am --continue`"
        )


def resume(
    from_version: str,
    to_version: str,
    *,
    pins: lock.Lock | None = None,
    work: Path | None = None,
    into: Path | None = None,
    keep: bool = False,
) -> Report:
    """Finish a port whose conflicts a person resolved in the work tree."""
    pins = pins or lock.load()
    src = pins.get(from_version)
    work = Path(work or default_work(to_version.removeprefix("v")))
    repo = gitutil.open_repo(work)
    if repo is None:
        raise TreeError(f"{work} holds no port; run `vpatch port {from_version} {to_version}`")
    refuse_am_in_progress(repo, work)
    dst = resolve(pins, to_version)
    done = {c.subject for c in gitutil.commits(repo, BASE_TAG.format(dst.version)) or []}
    todo = series.load(src.series_dir(pins.path.parent)).patches
    report = Report(src.version, dst.version, work)
    report.status = {p.name: "ported" if p.subject in done else "dropped" for p in todo}
    return _finish(report, repo, pins, dst, into, keep)


def _finish(report: Report, repo, pins: lock.Lock, dst: lock.Release, into, keep) -> Report:
    if not any(s != "dropped" for s in report.status.values()):
        if not keep:
            shutil.rmtree(report.work, ignore_errors=True)
        raise PatchError(
            f"every patch of {report.from_version} is already in {dst.version}; nothing to port"
        )
    into = Path(into or dst.series_dir(pins.path.parent))
    report.exported = export(report.work, into, pins)
    if dst.status == "unpinned" or not dst.series:
        # A new release is pinned as patched. A pinned one keeps its status:
        # an upstream release that lacks some fixes carries a series and stays
        # upstream (as 0.32.0 does); making it `patched` would move the default
        # release of every command, which is a person's call.
        status = "patched" if dst.status == "unpinned" else dst.status
        try:
            rel = into.resolve().relative_to(pins.path.parent.resolve()).as_posix()
        except ValueError:
            rel = str(into)
        lock.save(pins.with_release(replace(dst, status=status, series=rel)))
    if not keep:
        shutil.rmtree(report.work, ignore_errors=True)
    return report
