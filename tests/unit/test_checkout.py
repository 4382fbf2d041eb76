"""checkout.py, the apply engine: a release's source as a git repository with a
baseline tag and one commit per patch; all or nothing; dirty, foreign and
busy trees refused; status, unapply, render and the one-baseline rule."""

import fcntl
import os
import subprocess
from pathlib import Path

import pytest
from support import BASE, change, git, make_series
from vpatch import checkout, gitutil, quilt
from vpatch.errors import PatchError, TreeError


def run(pins, release_dir, series_dir, dest):
    series = quilt.load(series_dir)
    return checkout.apply(pins.get("9.9.0"), series, dest, source=str(release_dir))


def log(dest: Path) -> list[str]:
    return git(dest, "log", "--format=%s", "--reverse").splitlines()


def unapply(dest: Path, series_dir: Path, discard: bool = False) -> int:
    repo, version = checkout.open_tree(dest)
    return checkout.unapply(dest, repo, version, quilt.load(series_dir), discard)


def status(dest: Path, series_dir: Path) -> checkout.Status:
    repo, version = checkout.open_tree(dest)
    return checkout.status(dest, repo, version, quilt.load(series_dir))


def test_apply_makes_baseline_tag_and_one_commit_per_patch(
    pins, release_dir, good_series, tmp_path
):
    dest = tmp_path / "tree"
    result = run(pins, release_dir, good_series, dest)
    assert result.applied == ["0001-step-1.patch", "0002-step-2.patch"]
    assert result.created and result.source == str(release_dir)
    assert log(dest)[1:] == ["model: first change", "config: allow deepseek"]
    assert git(dest, "rev-parse", "vpatch/base-9.9.0^{commit}") == git(dest, "rev-parse", "HEAD~2")
    assert "line five" in (dest / "vllm/model.py").read_text()
    # the patch's message, DEP-3 fields included, is the commit's message
    assert "Applied-Upstream: 10.0.0" in git(dest, "log", "-1", "--format=%B")


def test_commit_ids_are_reproducible(pins, release_dir, good_series, tmp_path):
    a = run(pins, release_dir, good_series, tmp_path / "a").dest
    b = run(pins, release_dir, good_series, tmp_path / "b").dest
    assert git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD")


def test_reapply_is_a_noop(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "tree"
    run(pins, release_dir, good_series, dest)
    head = git(dest, "rev-parse", "HEAD")
    again = run(pins, release_dir, good_series, dest)
    assert again.applied == [] and len(again.already) == 2
    assert git(dest, "rev-parse", "HEAD") == head


def test_partial_tree_gets_the_rest(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "tree"
    run(pins, release_dir, good_series, dest)
    git(dest, "reset", "-q", "--hard", "HEAD~1")
    again = run(pins, release_dir, good_series, dest)
    assert again.applied == ["0002-step-2.patch"]


def test_dirty_tree_is_refused_and_untouched(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "tree"
    run(pins, release_dir, good_series, dest)
    unapply(dest, good_series)
    (dest / "README.md").write_text("local edit\n")
    with pytest.raises(TreeError, match="uncommitted changes"):
        run(pins, release_dir, good_series, dest)
    assert (dest / "README.md").read_text() == "local edit\n"
    assert len(log(dest)) == 1


def test_untracked_file_counts_as_dirty(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "tree"
    run(pins, release_dir, good_series, dest)
    (dest / "new.txt").write_text("x")
    with pytest.raises(TreeError, match="new.txt"):
        unapply(dest, good_series)


def test_unknown_commit_is_refused(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "tree"
    run(pins, release_dir, good_series, dest)
    unapply(dest, good_series)
    (dest / "README.md").write_text("mine\n")
    git(dest, "commit", "-qam", "my own work")
    with pytest.raises(TreeError, match="my own work"):
        run(pins, release_dir, good_series, dest)


def test_failing_patch_rolls_back_everything(pins, release_dir, tmp_path):
    model = BASE["vllm/model.py"]
    other = dict(BASE, **{"vllm/model.py": change(model, "line 30\n", "line thirty\n")})
    bad = make_series(
        tmp_path,
        other,
        [
            ("config: fine", {"vllm/config.py": "allow = ['x']\n"}),
            (
                "model: touches a line the release lacks",
                {"vllm/model.py": change(other["vllm/model.py"], "line thirty\n", "line 30!\n")},
            ),
        ],
    )
    dest = tmp_path / "tree"
    # a tree that exists and is at its baseline
    empty = tmp_path / "empty-series"
    empty.mkdir()
    (empty / "series").write_text("# nothing\n")
    run(pins, release_dir, empty, dest)
    before = git(dest, "rev-parse", "HEAD")
    with pytest.raises(PatchError) as e:
        run(pins, release_dir, bad, dest)
    msg = str(e.value)
    assert "0002-step-2.patch" in msg and "vllm/model.py" in msg and "hunk #1" in msg
    assert "\n" not in msg
    assert git(dest, "rev-parse", "HEAD") == before
    assert git(dest, "status", "--porcelain") == ""
    assert not (dest / ".git" / "rebase-apply").exists()


def test_failed_apply_into_new_dest_leaves_nothing(pins, release_dir, tmp_path):
    bad = make_series(
        tmp_path, {"vllm/other.py": "a\n"}, [("other: change", {"vllm/other.py": "b\n"})]
    )
    dest = tmp_path / "new-tree"
    with pytest.raises(PatchError, match="vllm/other.py"):
        run(pins, release_dir, bad, dest)
    assert not dest.exists()


def test_nonempty_foreign_folder_is_refused(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "foreign"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(TreeError, match="not a vpatch tree"):
        run(pins, release_dir, good_series, dest)
    assert (dest / "keep.txt").read_text() == "mine"


def test_a_file_as_dest_is_refused(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "file"
    dest.write_text("mine")
    with pytest.raises(TreeError, match="is not a folder"):
        run(pins, release_dir, good_series, dest)
    assert dest.read_text() == "mine"


def test_second_run_on_a_busy_tree_fails_clearly(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "tree"
    dest.mkdir()
    fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(TreeError, match="another vpatch run"):
            run(pins, release_dir, good_series, dest)
    finally:
        os.close(fd)
    assert list(dest.iterdir()) == []


def test_status_and_unapply(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "tree"
    run(pins, release_dir, good_series, dest)
    git(dest, "reset", "-q", "--hard", "HEAD~1")
    st = status(dest, good_series)
    assert [(p.name, p.applied) for p in st.patches] == [
        ("0001-step-1.patch", True),
        ("0002-step-2.patch", False),
    ]
    assert st.extra == [] and st.dirty == []
    assert unapply(dest, good_series) == 1
    assert (dest / "vllm/model.py").read_text() == BASE["vllm/model.py"]


def test_status_lists_foreign_commits_and_edits(patched_tree, good_series):
    (patched_tree / "README.md").write_text("mine\n")
    git(patched_tree, "commit", "-qam", "my own work")
    (patched_tree / "notes.txt").write_text("x\n")
    st = status(patched_tree, good_series)
    assert [p.applied for p in st.patches] == [True, True]
    assert len(st.extra) == 1 and st.extra[0].endswith(" my own work")
    assert st.dirty == ["notes.txt"]


# -- opening a tree: the one baseline tag HEAD is built on -------------------------


def test_open_tree_names_the_release_of_its_baseline(patched_tree):
    repo, version = checkout.open_tree(patched_tree)
    assert version == "9.9.0"
    assert Path(repo.working_tree_dir).resolve() == patched_tree.resolve()


def test_open_tree_refuses_two_baselines_and_none(patched_tree, tmp_path):
    git(patched_tree, "tag", "vpatch/base-9.8.0", "HEAD~1")
    with pytest.raises(TreeError, match=r"HEAD is on 2 vpatch/base-\* baseline tags"):
        checkout.open_tree(patched_tree)
    git(patched_tree, "tag", "-d", "vpatch/base-9.8.0", "vpatch/base-9.9.0")
    with pytest.raises(TreeError, match="HEAD is on no vpatch/base-"):
        checkout.open_tree(patched_tree)
    with pytest.raises(TreeError, match="no git repository"):
        checkout.open_tree(tmp_path / "release")


def test_a_baseline_tag_off_the_history_does_not_count(patched_tree):
    # a tag on a commit HEAD is not built on is some other tree's baseline
    git(patched_tree, "checkout", "-q", "-b", "side", "HEAD~2")
    (patched_tree / "README.md").write_text("side\n")
    git(patched_tree, "commit", "-qam", "side")
    git(patched_tree, "tag", "vpatch/base-9.8.0")
    git(patched_tree, "checkout", "-q", "-")
    assert checkout.open_tree(patched_tree)[1] == "9.9.0"
    repo, _ = checkout.open_tree(patched_tree)
    with pytest.raises(TreeError, match="HEAD is not on top of vpatch/base-9.8.0"):
        checkout.on_base(repo, "vpatch/base-9.8.0")


def test_refuse_am_names_the_unresolved_files(patched_tree, good_series, tmp_path):
    # a patch that conflicts with the tree, left half applied by `git am`
    (tmp_path / "m").mkdir()
    bad = make_series(
        tmp_path / "m",
        BASE,
        [("model: clash", {"vllm/model.py": change(BASE["vllm/model.py"], "line 5\n", "5!\n")})],
    )
    with pytest.raises(subprocess.CalledProcessError):
        git(patched_tree, "am", "--3way", str(bad / "0001-step-1.patch"))
    repo, _ = checkout.open_tree(patched_tree)
    with pytest.raises(
        TreeError, match=r"git am is still in progress \(vllm/model.py unresolved\)"
    ):
        checkout.refuse_am(repo)
    with pytest.raises(TreeError, match="git am is still in progress"):
        unapply(patched_tree, good_series)


# -- render: a tree's commits as a series ------------------------------------------------


def test_render_gives_numbered_patches_and_series(patched_tree):
    repo, _ = checkout.open_tree(patched_tree)
    files = checkout.render(repo, "vpatch/base-9.9.0")
    names = ["0001-model-first-change.patch", "0002-config-allow-deepseek.patch"]
    assert list(files) == [*names, "series"]
    assert files["series"] == "".join(f"{n}\n" for n in names).encode()
    assert files[names[1]] == gitutil.format_patch(repo, gitutil.head(repo))
    git(patched_tree, "commit", "-q", "--allow-empty", "-m", "nothing")
    with pytest.raises(PatchError, match="'nothing' changes no file"):
        checkout.render(repo, "vpatch/base-9.9.0")
