"""A patch carried onto a tree 3-way (`vpatch port`, `vpatch pr`), and the
conflict markers that leaves: two insertions at one place merged by keeping
both, anything else left to a person, and where the conflicts a person has
to resolve sit in a file (`vpatch carry`'s report).

The tree is a vpatch checkout (checkout.py); git runs in gitutil."""

from __future__ import annotations

import re
from pathlib import Path

from . import gitutil, quilt

# a conflict's marker lines as git writes them: <<<<<<< ours, =======, >>>>>>> theirs
_MARK = re.compile(r"^(<{7}|={7}|>{7})( |$)", re.M)


def carry(repo: gitutil.Repo, patch: quilt.Patch, rest: list[quilt.Patch]) -> str:
    """`git am --3way` of patch onto HEAD: clean, merged, dropped (it left
    nothing to change) or conflict (the am session is left with patch and
    rest queued, for a person). The repository must hold the blobs the
    patch's index lines name."""
    before = gitutil.head(repo)
    assert before is not None
    ok, out = gitutil.am_3way(repo, [patch.path], patch.date)
    merged = "3-way merge" in out  # git fell back from applying the text as is
    if not ok and _resolve_insertions(repo):
        # both sides added lines at one place (two appends to a list): keep both
        ok, _ = gitutil.am_continue(repo, patch.date or gitutil.EPOCH)
    if not ok:
        # queue this patch and every later one, so `git am --continue` does it all
        gitutil.reset_hard(repo, before)
        gitutil.am_3way(repo, [patch.path, *(p.path for p in rest)], patch.date)
        return "conflict"
    if gitutil.head(repo) == before:
        return "dropped"  # "No changes -- Patch already applied."
    return "merged" if merged else "clean"


def _resolve_insertions(repo: gitutil.Repo) -> bool:
    """Resolve the conflicts of the `git am --3way` in progress when every one
    is two insertions at one place (union_insertions); False, leaving them,
    otherwise."""
    texts = gitutil.conflict_texts(repo)
    if not texts:
        return False
    merged = {path: union_insertions(text) for path, text in texts.items()}
    done = {path: text for path, text in merged.items() if text is not None}
    if len(done) != len(merged):
        return False
    gitutil.mark_resolved(repo, done)
    return True


def union_insertions(text: str) -> str | None:
    """A file's text with diff3 conflict markers, merged when every conflict
    is two insertions at the same place (the base side is empty) by keeping
    ours then theirs, as appending to the same list on both sides needs;
    None for anything else (a side changed or removed lines), which is left
    to a person."""
    out: list[str] = []
    lines = iter(text.splitlines(keepends=True))
    found = False
    for line in lines:
        if not line.startswith("<<<<<<< "):
            out.append(line)
            continue
        found = True
        side: dict[str, list[str]] = {"ours": [], "base": [], "theirs": []}
        part, saw_base = "ours", False
        for inner in lines:
            if inner.startswith(">>>>>>> "):
                break
            if inner.startswith("||||||| "):
                part, saw_base = "base", True
            elif inner.rstrip("\r\n") == "=======":
                part = "theirs"
            else:
                side[part].append(inner)
        else:
            return None  # unterminated conflict
        if not saw_base or side["base"] or part != "theirs":
            return None
        out += side["ours"] + side["theirs"]
    return "".join(out) if found else None


def hunks(path: Path) -> list[str]:
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
