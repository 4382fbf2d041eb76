"""Writing the patch set: what `vpatch export` and `vpatch port` record of a
release's patches (record(): a variant kept, written, split, extended or
new, touching no other release, in the files and in the PatchSet it is
handed alike), and the one edit it makes to
patches.toml (set_spans(): a slug's `releases` line, everything else of
the file, comments included, as it was). Reading it is patchset.py's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from . import patchset
from .errors import ConfigError, PatchError, disk_error
from .patchset import KEY, PatchSet
from .paths import write_atomic

# -- writing patches.toml: only a slug's `releases` line, comments kept --------


def _header(slug: str) -> re.Pattern[str]:
    return re.compile(rf'^\[\s*"{re.escape(slug)}"\s*\]\s*(#.*)?$')


def _outside_strings(lines: list[str]) -> list[bool]:
    """Per line, whether it starts outside a multi-line string (an
    `explanation = '''...'''` may hold a line that looks like a table)."""
    out, inside = [], ""
    for ln in lines:
        out.append(not inside)
        for quote in re.findall(r"'''|\"\"\"", ln):
            if not inside:
                inside = quote
            elif quote == inside:
                inside = ""
    return out


def set_spans(path: Path, slug: str, spans: list[str], after: str | None = None) -> None:
    """Make `slug`'s variants `spans`: rewrite its `releases = [...]` line (one
    line, the only form we write), add one after its table header, or add the
    table (after `after`'s table, else at the end). Written atomically."""
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path.name}: {e}") from None
    quoted = ", ".join(f'"{s}"' for s in spans)
    line = f"{KEY} = [{quoted}]"
    lines = text.splitlines()
    code = _outside_strings(lines)
    heads = [i for i, ln in enumerate(lines) if code[i] and ln.startswith("[")]

    def head_of(name: str) -> int | None:
        return next((i for i in heads if _header(name).match(lines[i])), None)

    def end_of(head: int) -> int:
        return next((i for i in heads if i > head), len(lines))

    start = head_of(slug)
    if start is None:
        block = ["", f'["{slug}"]', line]
        at = len(lines)
        head = head_of(after) if after is not None else None
        if head is not None:
            at = end_of(head)
            while at > head + 1 and (not lines[at - 1].strip() or lines[at - 1][0] == "#"):
                at -= 1  # keep the next table's comments with it
        lines[at:at] = block
    else:
        end = end_of(start)
        own = [i for i in range(start + 1, end) if code[i] and re.match(rf"^{KEY}\s*=", lines[i])]
        if own and not lines[own[0]].rstrip().endswith("]"):
            raise ConfigError(f"{path.name} [{slug}]: write {KEY} on one line")
        if own:
            lines[own[0]] = line
        else:
            lines.insert(start + 1, line)
    try:
        write_atomic(path, ("\n".join(lines) + "\n").encode())
    except OSError as e:
        raise disk_error(e, f"cannot write {path.name}") from None


# -- recording a release's patches: what export and port write ------------------


@dataclass
class Recorded:
    """What record() did, per slug: "unchanged", "written" (the variant's
    file), "new" (a variant of its own), "extended" (a span grown to take
    the release), "split" (the release starts a variant of its own inside a
    span whose other releases keep the old file)."""

    done: dict[str, str] = field(default_factory=dict)


def record(
    ps: PatchSet, pinned: list[str], version: str, exported: list[tuple[str, bytes]]
) -> Recorded:
    """Make the patch set give `version` exactly `exported` ([(slug, format-patch
    bytes)], in series order: a tree's commits), touching no other release:
    a variant that serves `version` keeps its file when the change is the
    same, else `version` gets a file of its own (its span is split); a
    release no variant serves joins a neighbouring span with the same change,
    else gets a variant of its own. `pinned` are the lock's releases, which
    spans are made of. `ps` is updated as its files are (PatchSet.set_spans,
    .forget): afterwards it equals the set loaded anew, and no caller reads
    the files again. Raises PatchError, writing nothing, when the tree
    leaves out a patch the set gives `version`, has one whose code
    patches.toml says upstream removed by `version` (its `gone`), or orders
    them otherwise than patches.toml."""
    order = sorted({*pinned, version}, key=Version)
    at = order.index(version)
    before = order[at - 1] if at else None
    after = order[at + 1] if at + 1 < len(order) else None
    out = Recorded()
    slugs = [s for s, _ in exported]
    dropped = [v.slug for v in ps.carried(version) if v.slug not in slugs]
    if dropped:
        raise PatchError(
            f"the tree of vLLM {version} lacks {', '.join(dropped)}, which patches.toml gives "
            f"it; take {version} out of that patch's releases by hand, or apply it again"
        )
    gone = [s for s in slugs if s in ps.gone(version)]
    if gone:
        raise PatchError(
            f"the tree of vLLM {version} has {', '.join(gone)}, whose code patches.toml says "
            "upstream removed by then (its `gone`): drop it from the tree, or correct `gone`"
        )
    spans: dict[str, list[tuple[str, str]]] = {
        s: [(v.first, v.last) for v in ps.variants.get(s, [])] for s in slugs
    }
    writes: dict[Path, bytes] = {}
    removes: list[Path] = []
    for slug, data in exported:
        mine = spans[slug]
        v = ps.variant(slug, version)
        if v is not None:
            old = _bytes(ps.path(v))  # a variant without its file: PatchError, as everywhere
            if old == data:
                out.done[slug] = "unchanged"
            elif version == v.first:
                writes[v.path] = data
                out.done[slug] = "written"
            elif patchset.same_change(old, data):
                out.done[slug] = "unchanged"
            else:  # the change differs here: `version` and the rest of the span get it
                i = mine.index((v.first, v.last))
                mine[i : i + 1] = [(v.first, before or v.first), (version, v.last)]
                writes[ps.file(slug, version)] = data
                out.done[slug] = "split"
            continue
        low = next((fl for fl in mine if fl[1] == before), None) if before else None
        high = next((fl for fl in mine if fl[0] == after), None) if after else None
        if low is not None and patchset.same_change(_bytes(ps.file(slug, low[0])), data):
            mine[mine.index(low)] = (low[0], version)
            out.done[slug] = "extended"
        elif high is not None and patchset.same_change(_bytes(ps.file(slug, high[0])), data):
            # the span now starts at `version`: its file is exported from there
            mine[mine.index(high)] = (version, high[1])
            writes[ps.file(slug, version)] = data
            removes.append(ps.file(slug, high[0]))
            out.done[slug] = "extended"
        else:
            mine.append((version, version))
            writes[ps.file(slug, version)] = data
            out.done[slug] = "new"
        mine.sort(key=lambda fl: Version(fl[0]))
    tables = list(ps.slugs)  # the tables after the writes below, in order
    for i, slug in enumerate(slugs):
        if slug not in tables:
            tables.insert(tables.index(slugs[i - 1]) + 1 if i else len(tables), slug)
    covers = {
        s: any(Version(f) <= Version(version) <= Version(la) for f, la in spans[s]) for s in slugs
    }
    got = [s for s in tables if covers.get(s, False)]
    if got != slugs:
        raise PatchError(
            f"patches.toml orders vLLM {version}'s patches {', '.join(got)}; the tree has "
            f"{', '.join(slugs)}: move the tables of patches.toml into the tree's order"
        )
    try:
        for path, data in writes.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
    except OSError as e:
        raise disk_error(e, "cannot write the patch set") from None
    prev = None
    for slug in slugs:
        if out.done[slug] != "unchanged":
            set_spans(ps.toml, slug, [f if f == la else f"{f}:{la}" for f, la in spans[slug]], prev)
            ps.set_spans(slug, spans[slug], prev)  # the object says what the file says
        prev = slug
    for path in removes:
        path.unlink(missing_ok=True)
    ps.forget([*writes, *removes])
    return out


def _bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise disk_error(e, "cannot read a patch") from None
