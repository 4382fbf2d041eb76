"""The carry drill: the project rewound to the day before a release came
out, carried to it by `vpatch carry TO --write` against a stand-in package
index that knows only the releases up to it (support/drill.py), must come
back to what is committed: the lock entry, the patch set byte for byte,
doctor's rules.toml, and the generated docs.

0.33.0 and 0.32.0 carry cleanly; 0.31.0 is where the V2 attention-backend
fix needed a variant of its own: the carry stops on the conflict, the test
resolves it as the committed variant has it, and `--continue` reaches the
committed state. `make drill` runs the same against the real index with an
empty cache (VPATCH_DRILL=real)."""

from __future__ import annotations

import contextlib
import os
import shutil

import pytest
from support import drill, git
from vpatch import lock
from vpatch.commands import apply

pytestmark = pytest.mark.integration

PINS = lock.load()
REAL = os.environ.get("VPATCH_DRILL") == "real"


def index_env(upto: str) -> contextlib.AbstractContextManager:
    if REAL:
        return contextlib.nullcontext(None)
    return drill.stand_in(PINS, upto)


def differing(a: dict[str, bytes], b: dict[str, bytes]) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


@pytest.mark.parametrize(("frm", "to"), [("0.32.0", "0.33.0"), ("0.31.0", "0.32.0")])
def test_a_clean_carry_comes_back_to_what_is_committed(tmp_path, frm, to):
    expected = drill.copy_project(tmp_path / "expected")
    drill.rewind(expected, to)
    project = drill.copy_project(tmp_path / "project")
    drill.rewind(project, frm)
    with index_env(to) as idx:
        env = {"PIP_INDEX_URL": idx.url} if idx else {}
        r = drill.vpatch(project, "carry", to, "--write", env=env)
    assert r.returncode == 0, r.stderr
    assert differing(drill.files(project), drill.files(expected)) == []
    assert f"every probed fact is as in {frm}: newest = '{to}'" in r.stdout
    assert "- clean\n" in r.stdout  # lint


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
        r = drill.vpatch(project, "carry", to, "--write", env=env)
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
        r = drill.vpatch(project, "carry", to, "--continue", "--write", env=env)
    assert r.returncode == 0, r.stderr
    assert differing(drill.files(project), drill.files(expected)) == []
