"""What a release the lock does not cover yet says of itself, against the
release before it (what a carry reports, and a person decides on):

- doctor's facts (releasefacts/facts.py): each as its probe reads TO, changed
  where rules.toml says otherwise; unreadable where an anchor FROM has is
  gone from TO (anchors.moved says where it went, if a search of TO's
  vllm/ finds it), with no value read; what doctor takes as the same in
  every release (facts.SAME) that no longer holds;
- serving.toml's facts (releasefacts/modelcode.py: which file serves each
  family architecture per platform, what it does with aux ids) the same
  way, against serving.toml folded at TO;
- every patch's probe, ported or not: its verdict on FROM and on TO, where
  they differ (`code gone`: a file the probe reads went away).

It reads both releases' files from the cache (sources/files.py), TO's whole
vllm/ only when an anchor went missing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import lock, probes
from ..releasefacts import anchors, facts, modelcode
from ..sources.cache import Say, quiet
from ..sources.files import release_files


@dataclass(frozen=True)
class Unread:
    """A fact TO's source cannot tell: the anchors gone, where a search found
    them, and what the rules say of FROM."""

    missing: tuple[anchors.Anchor, ...]
    moved: Mapping[str, list[str]]  # str(anchor) -> where TO has it
    before: Any


@dataclass
class Facts:
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # field -> (rules, TO)
    unreadable: dict[str, Unread] = field(default_factory=dict)
    broken: list[str] = field(default_factory=list)  # facts.SAME that no longer hold
    # serving.toml's: {key: (serving.toml's value, TO's)}, the unreadable ones
    serving: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    serving_unreadable: dict[str, Unread] = field(default_factory=dict)

    @property
    def settled(self) -> bool:
        """Nothing for a person to decide: rules.toml's newest may move."""
        return not (
            self.changed
            or self.unreadable
            or self.broken
            or self.serving
            or self.serving_unreadable
        )


def files_of(pins: lock.Lock, version: str, globs: set[str], say: Say = quiet) -> dict[str, str]:
    """{path: text} of a release's files matching globs (cached)."""
    return probes.folder_files(release_files(pins.get(version), globs, say=say), globs)


def read_facts(pins: lock.Lock, frm: str, to: str, say: Say = quiet) -> Facts:
    """doctor's facts of TO against the rules of TO (rules.toml folds them
    from the tables at or below it: FROM's, before a person adds TO's) and
    the anchors of FROM."""
    globs = facts.globs()
    before, after = (facts.read(files_of(pins, v, globs, say)) for v in (frm, to))
    rules = pins.rules.at(to)
    out = Facts()
    gone = facts.unreadable(before, after)
    if gone:
        say(f"searching vLLM {to}'s source for where {len(gone)} facts' code went")
        tree = files_of(pins, to, set(anchors.SEARCHED), say)
        for name, missing in gone.items():
            out.unreadable[name] = Unread(
                tuple(missing),
                {str(a): anchors.moved(a, tree) for a in missing},
                getattr(rules, name),
            )
    diff = facts.differences(after.values, rules)
    out.changed = {k: v for k, v in diff.items() if k not in out.unreadable}
    out.broken = facts.broken(files_of(pins, to, globs, say))
    _serving(pins, frm, to, out, say)
    return out


def _serving(pins: lock.Lock, frm: str, to: str, out: Facts, say: Say) -> None:
    """serving.toml's facts of TO against the table folded at TO and FROM's
    anchors (read_facts' part for releasefacts/modelcode.py)."""
    table = pins.serving
    globs = modelcode.globs(table)
    files = {v: files_of(pins, v, globs, say) for v in (frm, to)}
    before, after = (modelcode.read(files[v], table) for v in (frm, to))
    gone = facts.unreadable(before, after)
    if gone:
        tree = files_of(pins, to, set(anchors.SEARCHED), say)
        expected = table.expected(frm)
        for name, missing in gone.items():
            out.serving_unreadable[name] = Unread(
                tuple(missing),
                {str(a): anchors.moved(a, tree) for a in missing},
                expected.get(name),
            )
    diff = modelcode.differences(after.values, table.expected(to))
    out.serving = {k: v for k, v in diff.items() if k not in out.serving_unreadable}
    out.broken += modelcode.broken(files[to], table)


def verdict(checks: list[probes.Check], files: dict[str, str]) -> str:
    """What a patch's probe says of a release's files: `has it` (upstream
    does what the patch does), `lacks it`, or `code gone` (a file a check
    reads is not there: the code the patch changes went away)."""
    if probes.holds(checks, files):
        return "has it"
    if any(not any(probes.matches(f, c.file) for f in files) for c in checks):
        return "code gone"
    return "lacks it"


def probe_changes(
    checks: probes.Probes, before: dict[str, str], after: dict[str, str]
) -> dict[str, tuple[str, str]]:
    """{slug: (verdict on FROM, verdict on TO)} of the patches whose probe
    says something else of TO than of FROM."""
    out = {}
    for slug, cs in checks.items():
        pair = (verdict(cs, before), verdict(cs, after))
        if pair[0] != pair[1]:
            out[slug] = pair
    return out


def read_probes(pins: lock.Lock, frm: str, to: str, say: Say = quiet) -> dict[str, tuple[str, str]]:
    """Every patch's probe on FROM's and TO's own source, ported or not: the
    ones whose verdict changed."""
    checks = probes.load(pins.patchset)
    globs = probes.patterns(checks)
    return probe_changes(checks, files_of(pins, frm, globs, say), files_of(pins, to, globs, say))
