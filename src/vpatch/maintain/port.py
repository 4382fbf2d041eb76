"""`vpatch port FROM TO`: carry a release's series to another release.

The work tree (build/port-TO) is one git repository holding both releases:
FROM's baseline (tag vpatch/from-FROM) with FROM's series applied on branch
from-FROM, and TO's baseline as an unrelated root commit (tag
vpatch/base-TO) with the ported patches on branch port-TO. Each FROM patch
goes onto TO with `git am --3way`: the patch's index lines name FROM's blobs,
which the repository has, so git can merge where the text moved or changed.

FROM's baseline is tagged vpatch/from-*, not vpatch/base-*, so the work tree
is an ordinary vpatch tree of TO (`vpatch status`, `vpatch export` work).
The patches carried are FROM's commits rendered again (a variant's file names
the blobs of the release it was exported from, which need not be FROM).

The result goes into the patch set as `vpatch export` writes it
(patchset_write.record): a patch whose change is the same on TO extends the span of
FROM's variant when TO is its neighbour among the pinned releases, anything
else becomes a variant of TO's own; `--into DIR` writes a plain series folder
instead.

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
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import (
    checkout,
    gitutil,
    lock,
    patchset_write,
    probes,
    quilt,
    resources,
    sources,
    threeway,
)
from ..errors import PatchError, TreeError
from ..paths import empty, scratch
from ..shown import Shown
from ..sources.cache import Say, quiet
from ..sources.refresh import resolve

FROM_TAG = "vpatch/from-{}"


class NothingToPort(PatchError):
    """Every patch of FROM's series is upstream in TO: TO needs no series."""


@dataclass
class Ported(Shown):
    from_version: str
    to_version: str
    work: Path
    status: dict[str, str] = field(default_factory=dict)  # patch name -> status
    unresolved: list[str] = field(default_factory=list)  # files in conflict
    into: Path | None = None  # the patch set's folder, or the series folder written
    names: list[str] = field(default_factory=list)  # its patches
    variants: dict[str, str] = field(default_factory=dict)  # slug -> what record() did

    @property
    def conflict(self) -> str | None:
        return next((n for n, s in self.status.items() if s == "conflict"), None)

    def lines(self) -> list[str]:
        """Each patch's fate, each variant record() made; unless it stopped
        at a conflict, what was written."""
        out = [f"  {status:8}  {name}" for name, status in self.status.items()]
        out += [f"  {what:9}  {slug}" for slug, what in self.variants.items()]
        if self.conflict:
            return out
        return [*out, f"{self.into}: {len(self.names)} patches for vLLM {self.to_version}"]


def default_work(to_version: str) -> Path:
    return Path("build") / f"port-{to_version}"


def port(
    from_version: str,
    to_version: str,
    *,
    pins: lock.Lock,
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
    resources.writable("vpatch port", pins.root)
    src = pins.get(from_version)
    dst = resolve(pins, to_version, offline, say)
    series = pins.series(src)
    if series is None:
        raise PatchError(f"vLLM {src.version} carries no series; nothing to port")
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
        for p in series.patches:  # FROM's own series must apply to FROM
            gitutil.am(repo, p.path, p.date)
        series = _rendered(repo, FROM_TAG.format(src.version))
        gitutil.tag(repo, checkout.BASE_TAG.format(dst.version), base_to)
        gitutil.switch(repo, f"port-{dst.version}", base_to)
        checks = probes.load(meta_path or pins.patchset)
        have = probes.folder_files(work, probes.patterns(checks))
        for i, p in enumerate(series.patches):
            report.status[p.name] = _carry(repo, p, series.patches[i + 1 :], checks, have)
            say(f"{p.name}: {report.status[p.name]}")
            if report.status[p.name] == "conflict":
                report.unresolved = gitutil.conflicted(repo)
                return report
    except BaseException:
        _remove(work, created)
        raise
    return _finish(report, repo, pins, dst, into, keep)


def _rendered(repo: gitutil.Repo, base: str) -> quilt.Series:
    """The commits base..HEAD as patch files in the repository's .git, whose
    index lines name blobs the repository holds (what `git am --3way` needs)."""
    folder = Path(repo.git_dir) / "vpatch-port"
    quilt.write(folder, checkout.render(repo, base))
    return quilt.load(folder)


def _remove(work: Path, created: bool) -> None:
    """Leave no trace: remove the work tree (a folder given empty stays)."""
    if created:
        shutil.rmtree(work, ignore_errors=True)
    else:
        empty(work)


def _commit_release(
    repo: gitutil.Repo, release: lock.Release, source: str, offline: bool, say: Say
) -> str:
    with scratch("vpatch-port-") as tmp:
        kind = sources.resolve(release, source)
        what = sources.materialize(release, kind, Path(tmp), offline, say=say)
        return gitutil.commit_folder(repo, Path(tmp), f"vLLM {release.version} ({what})")


def _carry(
    repo: gitutil.Repo,
    patch: quilt.Patch,
    rest: list[quilt.Patch],
    checks: probes.Probes,
    have: dict[str, str],
) -> str:
    if probes.holds(checks.get(patch.slug, []), have):
        return "dropped"
    return threeway.carry(repo, patch, rest)


def resume(
    from_version: str,
    to_version: str,
    *,
    pins: lock.Lock,
    work: Path | None = None,
    into: Path | None = None,
    keep: bool = False,
) -> Ported:
    """Finish a port whose conflicts a person resolved in the work tree.

    A patch with no commit on TO's baseline counts as `dropped` only when
    its probe holds on TO's baseline: an interrupted port (killed between
    two patches) looks like a finished one otherwise, and a patch TO lacks
    would be reported upstream. So such a port is refused, saying why."""
    resources.writable("vpatch port", pins.root)
    src = pins.get(from_version)
    work = Path(work or default_work(to_version.removeprefix("v")))
    repo = gitutil.open_repo(work)
    if repo is None:
        raise TreeError(f"{work} holds no port; run `vpatch port {from_version} {to_version}`")
    checkout.refuse_am(repo)
    dst = resolve(pins, to_version)
    base = checkout.BASE_TAG.format(dst.version)
    again = f"remove {work} and port again"
    if gitutil.tag_sha(repo, base) is None:
        raise TreeError(
            f"{work}: the port was interrupted before TO's baseline ({base}) was made; "
            f"there is nothing to go on from: {again}"
        )
    done = {c.subject for c in checkout.on_base(repo, base)}
    series = _patches_of(pins, src)
    missing = [p for p in series if p.subject not in done]
    if missing:
        checks = probes.load(pins.patchset)
        have = gitutil.files_at(repo, base, lambda f: _probed(f, checks))
        for p in missing:
            if not probes.holds(checks.get(p.slug, []), have):
                raise TreeError(
                    f"{work}: {p.name} has no commit on {base}, and vLLM {dst.version} lacks "
                    "it (its probe does not hold there): the port was interrupted, or the "
                    f"patch skipped; `git am` it there and go on, or {again}"
                )
    report = Ported(src.version, dst.version, work)
    report.status = {p.name: "ported" if p.subject in done else "dropped" for p in series}
    return _finish(report, repo, pins, dst, into, keep)


def _probed(path: str, checks: probes.Probes) -> bool:
    return any(probes.matches(path, g) for g in probes.patterns(checks))


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
        raise NothingToPort(
            f"every patch of {report.from_version} is already in {dst.version}; nothing to port"
        )
    checkout.refuse_am(repo)
    checkout.refuse_dirty(repo)
    files = checkout.render(repo, checkout.BASE_TAG.format(dst.version))
    report.names = [n for n in files if n != "series"]
    if into is not None:
        quilt.write(Path(into), files)
        report.into = Path(into)
    else:
        exported = [(quilt.slug(n), files[n]) for n in report.names]
        report.variants = patchset_write.record(
            pins.patchset, pins.versions(), dst.version, exported
        ).done
        report.into = pins.patchset.dir
        # the release's status is what its series makes it (PatchSet.status):
        # patched when it carries part of EAGLE-3 itself, else upstream-fix;
        # `pins` holds what record() and put() wrote, so the caller's lock is
        # the files' as they are now
        status = pins.patchset.status(dst.version)
        if status != dst.status:
            pins.put(replace(dst, status=status))
    if not keep:
        shutil.rmtree(report.work, ignore_errors=True)
    return report


def _patches_of(pins: lock.Lock, release: lock.Release) -> list[quilt.Patch]:
    s = pins.series(release)
    return s.patches if s else []
