"""pr/draft.py: the vLLM pull request drafted on the synthetic releases
and checkouts of support.pr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import change, commit_tree, git, write_tree
from support import pr as world
from support.pr import FIVE, FIX, FIXED, SIGNOFF, TEST, UPSTREAM, checkout, kw
from vpatch import gitutil
from vpatch.errors import ConfigError, TreeError
from vpatch.pr import draft as drafting

root = world.root  # the fixture (support.pr)


def test_onto_release_sends_only_what_upstream_lacks(root, tmp_path):
    out = tmp_path / "out"
    d = drafting.draft("10.0.0", out=out, source=str(tmp_path / "rel-10.0.0"), **kw(root))
    assert [(c.status, c.since) for c in d.candidates] == [
        ("upstream", "9.9.0"),
        ("upstream", "9.9.0"),
        ("clean", ""),
    ]
    tree = out / "vllm-10.0.0"
    assert d.tree == tree and d.branch == "vpatch/eagle3-10.0.0"
    assert git(tree, "branch", "--show-current").strip() == d.branch
    log = git(tree, "log", "--format=%an <%ae>|%cn|%s", "vpatch/base-10.0.0..HEAD").splitlines()
    assert log == [f"{SIGNOFF}|Jane Doe|[Bugfix][Model] Model: fix thirty at layer 0"]
    msg = git(tree, "log", "-1", "--format=%B")
    assert msg.rstrip().endswith(f"Signed-off-by: {SIGNOFF}")
    assert "Origin:" not in msg and "Last-Update:" not in msg  # DEP-3 is ours, not vLLM's
    assert (tree / "vllm/model.py").read_text() == FIXED
    assert git(tree, "remote").strip() == ""  # nothing to push to, nothing pushed
    # series/: the commit as format-patch, byte for byte what export gives
    names = (out / "series/series").read_text().split()
    assert names == ["0001-bugfix-model-model-fix-thirty-at-layer-0.patch"]
    repo = gitutil.open_repo(tree)
    sha = gitutil.head(repo)
    assert (out / "series" / names[0]).read_bytes() == gitutil.format_patch(repo, sha)
    body = (out / "PR_BODY.md").read_text()
    for head in ("## Purpose", "## Test Plan", "## Test Result", "- [x] The purpose"):
        assert head in body
    # true and consistent: the test the commit adds, the tier command for a
    # release the tier can run, and no claim that anything ran
    assert f"pytest -v {TEST}" in body and "make test-vllm VLLM=10.0.0" in body
    assert "Not run yet: run `make test-vllm VLLM=10.0.0`" in body and "was run" not in body
    assert "- [ ] The test results" in body
    assert d.title == "[Bugfix][Model] Model: fix thirty at layer 0"
    assert any("gh pr create --repo vllm-project/vllm" in c for c in d.commands)
    assert any(f"--body-file {out / 'PR_BODY.md'}" in c for c in d.commands)
    # the tree is the release archive, not vLLM's history: nothing is pushed
    # from it (it once printed `git -C <tree> push` after saying so)
    assert not any(c.startswith(f"git -C {tree}") for c in d.commands)
    assert d.commands[1:4] == [
        f"git -C VLLM switch -c {d.branch} origin/main",
        f"git -C VLLM am --3way {out / 'series'}/*.patch",
        f"git -C VLLM push -u YOUR_FORK {d.branch}",
    ]


def test_the_same_inputs_give_the_same_commit(root, tmp_path):
    shas = []
    for n in (1, 2):
        out = tmp_path / f"out{n}"
        drafting.draft("10.0.0", out=out, source=str(tmp_path / "rel-10.0.0"), **kw(root))
        shas.append(git(out / "vllm-10.0.0", "rev-parse", "HEAD"))
    assert shas[0] == shas[1]


def test_results_of_the_tier_fill_the_test_result(root, tmp_path):
    """--results FILE: the tier's results file (tests/vllm/tier.py run), not
    anything in the cache."""
    res = {
        "format": 1,
        "when": "2026-12-01T10:00:00+00:00",
        "releases": {
            "10.0.0": {
                "unpatched": {"passed": ["test_a"], "failed": ["test_layer_0"]},
                "patched": {"passed": ["test_a", "test_layer_0"], "failed": []},
            }
        },
        "runs": [],
    }
    (tmp_path / "results.json").write_text(json.dumps(res))
    out = tmp_path / "out"
    src = str(tmp_path / "rel-10.0.0")
    drafting.draft("10.0.0", out=out, source=src, results=tmp_path / "results.json", **kw(root))
    body = (out / "PR_BODY.md").read_text()
    assert "not run yet" not in body and "- [x] The test results" in body
    assert "| without this PR | 1 | 1 |" in body and "| with this PR | 2 | 0 |" in body
    assert "vpatch tier on vLLM 10.0.0 (`make test-vllm VLLM=10.0.0`), 2026-12-01" in body
    assert "Failing without this PR, passing with it:\n\n- `test_layer_0`" in body


@pytest.mark.parametrize(
    "text", ["not json", '{"releases": {"10.0.0": {"unpatched": {}}}}', "[]"], ids=str
)
def test_results_that_are_not_the_tiers_are_refused_first(root, tmp_path, text):
    (tmp_path / "results.json").write_text(text)
    with pytest.raises(ConfigError, match="--results"):
        drafting.draft(
            "10.0.0",
            out=tmp_path / "out",
            source=str(tmp_path / "rel-10.0.0"),
            results=tmp_path / "results.json",
            **kw(root),
        )
    assert not (tmp_path / "out").exists()


def test_nothing_left_on_a_release_leaves_no_tree(root, tmp_path):
    src = write_tree(tmp_path / "rel-11", {**UPSTREAM, "vllm/model.py": FIXED})
    d = drafting.draft("10.0.0", source=str(src), **kw(root))
    assert not d.sent and d.branch == ""
    assert not Path("build/pr-10.0.0").exists()


def test_patch_sends_the_named_candidates_alone(root, tmp_path):
    src = str(tmp_path / "rel-10.0.0")
    every = drafting.draft("10.0.0", out=tmp_path / "all", source=src, **kw(root)).candidates
    assert len(every) == 3
    key = every[0].slug
    d = drafting.draft("10.0.0", out=tmp_path / "one", source=src, only=(key,), **kw(root))
    assert [c.slug for c in d.candidates] == [key]  # upstream already: nothing to send
    assert not d.sent and d.branch == "" and not (tmp_path / "one/vllm-10.0.0").exists()


def test_a_backport_of_a_merged_fix_is_never_sent(root, tmp_path):
    """A patch whose DEP-3 says Applied-Upstream (a release, or the merged
    PR) is upstream's already, whatever the target's tree holds."""
    [fix] = (root / "patches").glob("*/10.0.0.patch")
    merged = "https://github.com/vllm-project/vllm/pull/1"
    text = fix.read_text().replace("Last-Update:", f"Applied-Upstream: {merged}\nLast-Update:", 1)
    fix.write_text(text)
    d = drafting.draft("10.0.0", source=str(tmp_path / "rel-10.0.0"), **kw(root))
    assert [(c.status, c.since) for c in d.candidates][-1] == ("upstream", merged)
    assert not d.sent and d.branch == ""


def test_an_unknown_patch_is_refused_before_anything_is_made(root, tmp_path):
    with pytest.raises(ConfigError, match="--patch nope: not a patch of the pull request"):
        drafting.draft("10.0.0", out=tmp_path / "o", only=("nope",), **kw(root))
    assert not (tmp_path / "o").exists()


def test_three_way_merge_where_the_context_moved(root, tmp_path):
    moved = change(FIVE, "v27 = 27\n", "v27 = 270\n")  # in its context: no clean apply
    co = checkout(tmp_path / "vllm", {**UPSTREAM, "vllm/model.py": moved})
    d = drafting.draft(str(co), out=tmp_path / "out", **kw(root))
    assert d.sent[0].status == "merged"
    short = git(co, "rev-parse", "--short=10", "main").strip()
    assert d.branch == f"vpatch/eagle3-{short}"
    assert git(co, "branch", "--show-current").strip() == d.branch
    text = (co / "vllm/model.py").read_text()
    assert "v27 = 270\nv28 = 28\nv29 = 29\nv30 = fixed()\n" in text
    assert git(co, "rev-list", "--count", "main..HEAD").strip() == "1"
    # a checkout of vLLM's history: the branch is pushed from it
    assert d.commands[0] == f"git -C {co} push -u YOUR_FORK {d.branch}"


def test_a_dirty_checkout_is_refused(root, tmp_path):
    co = checkout(tmp_path / "vllm", UPSTREAM)
    (co / "notes.txt").write_text("mine\n")
    with pytest.raises(TreeError, match="uncommitted changes \\(notes.txt\\)"):
        drafting.draft(str(co), **kw(root))
    assert git(co, "branch", "--format=%(refname:short)").split() == ["main"]
    assert (co / "notes.txt").read_text() == "mine\n"


def test_an_existing_branch_is_refused(root, tmp_path):
    co = checkout(tmp_path / "vllm", UPSTREAM)
    short = git(co, "rev-parse", "--short=10", "HEAD").strip()
    git(co, "branch", f"vpatch/eagle3-{short}")
    with pytest.raises(TreeError, match="already has branch"):
        drafting.draft(str(co), **kw(root))


def test_an_existing_release_tree_is_refused(root, tmp_path):
    write_tree(Path("build/pr-10.0.0"), {"mine.txt": "x\n"})
    with pytest.raises(TreeError, match="exists"):
        drafting.draft("10.0.0", source=str(tmp_path / "rel-10.0.0"), **kw(root))
    assert Path("build/pr-10.0.0/mine.txt").is_file()


def test_a_sign_off_is_required(root, tmp_path, monkeypatch):
    monkeypatch.setattr(gitutil, "identity", lambda repo=None: None)
    with pytest.raises(ConfigError, match="--signoff"):
        drafting.draft("10.0.0", **{**kw(root), "signoff": None})
    with pytest.raises(ConfigError, match="Your Name <you@example.com>"):
        drafting.draft("10.0.0", **{**kw(root), "signoff": "no email"})
    assert not Path("build").exists()


def test_a_patch_without_probe_is_tried_and_dropped_only_by_git(root, tmp_path):
    meta = root / "patches/patches.toml"
    text = meta.read_text()
    meta.write_text(text.replace('probe = [{ file = "vllm/model.py", uses = "five" }]', ""))
    co = checkout(tmp_path / "vllm", {**UPSTREAM, "vllm/model.py": FIXED})
    d = drafting.draft(str(co), **kw(root))
    assert [c.status for c in d.candidates] == ["included", "upstream", "upstream"]
    assert not d.sent and d.branch == ""
    # the branch it tried on is gone, the checkout is back where it was
    assert git(co, "branch", "--format=%(refname:short)").split() == ["main"]
    assert git(co, "status", "--porcelain") == ""


def test_a_second_run_on_its_own_draft_finishes_it_again(root, tmp_path):
    """On its own draft branch the fix's probe holds: that is the draft, not
    upstream; the second run re-titles nothing new and rewrites the body."""
    out = tmp_path / "out"
    first = drafting.draft("10.0.0", out=out, source=str(tmp_path / "rel-10.0.0"), **kw(root))
    head = git(first.tree, "rev-parse", "HEAD")
    (out / "PR_BODY.md").unlink()
    again = drafting.draft("10.0.0", out=out, source=str(tmp_path / "rel-10.0.0"), **kw(root))
    assert [c.status for c in again.candidates if c.patch.name == FIX] == ["ported"]
    assert not any(c.status == "upstream" and c.patch.name == FIX for c in again.candidates)
    assert git(again.tree, "rev-parse", "HEAD") == head  # same inputs, same commit
    assert (out / "PR_BODY.md").is_file() and again.branch == first.branch
    checkout = commit_tree(tmp_path / "co", UPSTREAM)
    d = drafting.draft(str(checkout), out=tmp_path / "out2", **kw(root))
    assert d.branch and git(checkout, "branch", "--show-current").strip() == d.branch
    again = drafting.draft(str(checkout), out=tmp_path / "out2", **kw(root))
    assert [c.status for c in again.candidates if c.patch.name == FIX] == ["ported"]


def test_a_relative_out_is_the_callers(root, tmp_path):
    """--out relative to the caller's folder (the fixture's empty one): the
    release's tree, series/ and PR_BODY.md land there, and the tree holds
    the release and the one commit, nothing git made of the relative path."""
    out = Path("rel/out")
    d = drafting.draft("10.0.0", out=out, source=str(tmp_path / "rel-10.0.0"), **kw(root))
    assert d.tree == out / "vllm-10.0.0" and [c.status for c in d.sent] == ["clean"]
    files = sorted(
        p.relative_to(d.tree).as_posix()
        for p in d.tree.rglob("*")
        if ".git" not in p.parts and p.is_file()
    )
    assert files == sorted([*UPSTREAM, TEST])
    folders = [p.relative_to(d.tree).as_posix() for p in d.tree.rglob("*") if p.is_dir()]
    assert all(any(f.startswith(f"{x}/") for f in files) for x in folders if ".git" not in x)
    assert sorted(p.name for p in out.iterdir()) == ["PR_BODY.md", "series", "vllm-10.0.0"]
    assert sorted(p.name for p in Path(".").iterdir()) == ["rel"]
