"""The carry drill: the project rewound to the day before a release came
out, carried to it by `vpatch carry TO --write` against a stand-in package
index that knows only the releases up to it (support/drill.py), must come
back to what is committed: the lock entry, the patch set byte for byte,
doctor's rules.toml, and the generated docs, the tier's included.

- The newest pinned release, carried from the one before: whatever the
  carry could not decide is exactly what the report's `## A person decides`
  names, which is exactly the facts of the release's committed table in
  rules.toml (none when its facts read as the release before's). As
  --write left it, the copy passes `make lint`'s docs check and the unit
  tests that read vpatch's data (what the scheduled carry checks before a
  person sees it); then the person's decisions go in, and `## Next` is
  followed to the letter (`make docs`, `make lint`, `make test`'s unit
  tests), and the copy is the checkout byte for byte.
- 0.30.0 -> 0.31.0 is where the V2 attention-backend fix needed a variant
  of its own: the carry stops on the conflict, the test resolves it as the
  committed variant has it, and `--continue` reaches the committed state.
  The default run takes it only when the newest case meets no conflict of
  its own (NEWEST_CONFLICTS), which otherwise stands for it.
- `make drill` (VPATCH_DRILL=real) runs the same against the real index
  with an empty cache, the clean carries of 0.32.0 and 0.33.0 besides, and
  the whole unit suite and `make lint` on every carried copy."""

from __future__ import annotations

import contextlib
import os
import re
import shutil

import pytest
from support import drill, git
from support.cli import vpatch
from vpatch import lock, rules
from vpatch.commands import apply

pytestmark = pytest.mark.integration

PINS = lock.load()
REAL = os.environ.get("VPATCH_DRILL") == "real"
BEFORE, NEWEST = PINS.versions()[-2:]


def index_env(upto: str) -> contextlib.AbstractContextManager:
    if REAL:
        return contextlib.nullcontext(None)
    return drill.stand_in(PINS, upto)


def differing(a: dict[str, bytes], b: dict[str, bytes]) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def green(project) -> None:
    """The carried copy as --write left it, before a person: `make lint`
    (its docs check, or with REAL all of it) and the unit tests (the data's,
    or with REAL all), as the scheduled carry runs them on its branch."""
    drill.make(project, "lint" if REAL else "lint-docs")
    r = drill.run_tests(project, *(["tests/unit"] if REAL else drill.DATA_TESTS))
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def followed(project, report: str, release: str, table: str) -> None:
    """`## Next` followed to the letter; what it leaves is only the tier."""
    left = drill.follow(project, report, release, table, whole=REAL)
    assert all(step.startswith(f"make test-vllm VLLM={release}:") for step in left), left


# The conflicts a carry of the newest release meets, which a person resolved
# as its committed variants have them: {(from, to): {patch: file}}. 0.34.0
# makes in the DeepSeek-V3.2 ROCm module's aux loop its own layer-0 change,
# on the lines the V3.2 capture fix rewrites.
NEWEST_CONFLICTS = {
    ("0.33.0", "0.34.0"): {
        "0004-deepseek-v32-capture-eagle-3-aux-states-after-the-all-reduce.patch": (
            "vllm/models/deepseek_v32/amd/model.py"
        )
    }
}


def resolve_as_committed(tmp_path, project, to: str, stderr: str, expected: dict) -> None:
    """The conflict the carry stopped on, one of `expected` ({patch: file}),
    resolved as the committed variant has it, and `git am --continue`."""
    m = re.search(r"(\S+\.patch) conflicts with vLLM \S+ in (\S+) \(lines ", stderr)
    assert m and expected.get(m[1]) == m[2], stderr
    committed = tmp_path / "committed"
    if not committed.exists():
        apply.apply(to, dest=committed, pins=PINS)
    work = project / "build" / f"carry-{to}" / "port"
    shutil.copyfile(committed / m[2], work / m[2])
    git(work, "add", m[2])
    git(work, "am", "--continue")


def test_the_newest_release_carried_from_the_one_before(tmp_path):
    project = drill.copy_project(tmp_path / "project")
    drill.rewind(project, BEFORE)
    conflicts = NEWEST_CONFLICTS.get((BEFORE, NEWEST), {})
    with index_env(NEWEST) as idx:
        env = drill.project_env(project, {"PIP_INDEX_URL": idx.url} if idx else {})
        r = vpatch("carry", NEWEST, "--write", env=env, cwd=project)
        for _ in conflicts:
            assert r.returncode == 5, r.stderr
            resolve_as_committed(tmp_path, project, NEWEST, r.stderr, conflicts)
            r = vpatch("carry", NEWEST, "--continue", "--write", env=env, cwd=project)
    assert r.returncode == 0, r.stderr
    assert "- clean\n" in r.stdout  # lint
    table = drill.table(drill.ROOT, NEWEST)
    keys = set(rules.load(drill.ROOT / drill.DATA / rules.FILE).changes[-1][1]) if table else set()
    assert drill.decided(r.stdout) == keys, r.stdout
    if table:
        green(project)  # as the carry left it, the decisions not made yet
        assert f"newest stays {BEFORE}" in r.stdout
        assert "make docs" in drill.next_steps(r.stdout)
    else:  # Next is make lint and make test on what --write wrote
        assert f"every probed fact is as in {BEFORE}: newest = '{NEWEST}'" in r.stdout
    followed(project, r.stdout, NEWEST, table)
    assert differing(drill.files(project), drill.files(drill.ROOT)) == []


@pytest.mark.skipif(not REAL, reason="make drill: the newest release's case stands for them")
@pytest.mark.parametrize(("frm", "to"), [("0.32.0", "0.33.0"), ("0.31.0", "0.32.0")])
def test_a_clean_carry_comes_back_to_what_is_committed(tmp_path, frm, to):
    expected = drill.copy_project(tmp_path / "expected")
    drill.rewind(expected, to)
    project = drill.copy_project(tmp_path / "project")
    drill.rewind(project, frm)
    r = vpatch("carry", to, "--write", env=drill.project_env(project, {}), cwd=project)
    assert r.returncode == 0, r.stderr
    # what the carry could not decide is the committed table of `to`, if any
    table = drill.table(drill.ROOT, to)
    keys = dict(rules.load(drill.ROOT / drill.DATA / rules.FILE).changes).get(to, {})
    assert drill.decided(r.stdout) == set(keys), r.stdout
    if not table:
        assert f"every probed fact is as in {frm}: newest = '{to}'" in r.stdout
    assert "- clean\n" in r.stdout  # lint
    followed(project, r.stdout, to, table)  # the decisions, make docs, lint, test
    assert differing(drill.files(project), drill.files(expected)) == []


@pytest.mark.skipif(
    not REAL and bool(NEWEST_CONFLICTS.get((BEFORE, NEWEST))),
    reason="make drill: the newest release's case stops on a conflict and continues",
)
def test_a_conflict_stops_then_continue_reaches_what_is_committed(tmp_path):
    frm, to = "0.30.0", "0.31.0"
    expected = drill.copy_project(tmp_path / "expected")
    drill.rewind(expected, to)
    project = drill.copy_project(tmp_path / "project")
    drill.rewind(project, frm)
    fix = "0003-spec-decode-v2-the-drafter-selects-its-own-attention-backend.patch"
    conflicted = "vllm/v1/worker/gpu/spec_decode/eagle/utils.py"
    with index_env(to) as idx:
        env = {"PIP_INDEX_URL": idx.url} if idx else {}
        r = vpatch("carry", to, "--write", env=drill.project_env(project, env), cwd=project)
        assert r.returncode == 5, r.stderr
        assert f"{fix} conflicts with vLLM {to} in {conflicted} (lines " in r.stderr
        assert f"`vpatch carry {to} --continue`" in r.stderr
        # nothing written into the checkout before the carry is done
        rewound = drill.copy_project(tmp_path / "rewound")
        drill.rewind(rewound, frm)
        assert differing(drill.files(project), drill.files(rewound)) == []
        # a person resolves it as the committed variant has it
        committed = tmp_path / "committed"
        apply.apply(to, dest=committed, pins=PINS)
        work = project / "build" / f"carry-{to}" / "port"
        shutil.copyfile(committed / conflicted, work / conflicted)
        git(work, "add", conflicted)
        git(work, "am", "--continue")
        r = vpatch(
            "carry", to, "--continue", "--write", env=drill.project_env(project, env), cwd=project
        )
    assert r.returncode == 0, r.stderr
    # what the carry could not decide is the committed table of `to`, if any;
    # its decisions and `make docs` as Next says (the newest case follows
    # Next whole; here the conflict is the point)
    table = drill.table(drill.ROOT, to)
    keys = dict(rules.load(drill.ROOT / drill.DATA / rules.FILE).changes).get(to, {})
    assert drill.decided(r.stdout) == set(keys), r.stdout
    if table:
        assert "make docs" in drill.next_steps(r.stdout)
        drill.decide(project, to, table)
        drill.make(project, "docs")
    assert differing(drill.files(project), drill.files(expected)) == []
