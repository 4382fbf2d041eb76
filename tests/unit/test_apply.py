import fcntl
import os
from pathlib import Path

import pytest
from conftest import BASE, change, git, make_series
from vpatch.commands import apply
from vpatch.errors import ConfigError, PatchError, TreeError, UnsafePathError


def run(pins, release_dir, series, dest):
    return apply.apply("9.9.0", dest=dest, source=str(release_dir), series_dir=series, pins=pins)


def log(dest: Path) -> list[str]:
    return git(dest, "log", "--format=%s", "--reverse").splitlines()


def test_apply_makes_baseline_tag_and_one_commit_per_patch(
    pins, release_dir, good_series, tmp_path
):
    dest = tmp_path / "tree"
    result = run(pins, release_dir, good_series, dest)
    assert result.applied == ["0001-step-1.patch", "0002-step-2.patch"]
    assert log(dest)[1:] == ["model: first change", "config: allow deepseek"]
    assert git(dest, "rev-parse", "vpatch/base-9.9.0^{commit}") == git(dest, "rev-parse", "HEAD~2")
    assert "line five" in (dest / "vllm/model.py").read_text()
    # the patch's message, DEP-3 fields included, is the commit's message
    assert "Applied-Upstream: 0.18.0" in git(dest, "log", "-1", "--format=%B")


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
    apply.unapply(dest)
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
        apply.unapply(dest)


def test_unknown_commit_is_refused(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "tree"
    run(pins, release_dir, good_series, dest)
    apply.unapply(dest)
    (dest / "README.md").write_text("mine\n")
    git(dest, "commit", "-qam", "my own work")
    with pytest.raises(TreeError, match="my own work"):
        run(pins, release_dir, good_series, dest)


def test_failing_patch_rolls_back_everything(pins, release_dir, tmp_path):
    model = BASE["vllm/model.py"]
    other = dict(BASE, **{"vllm/model.py": change(model, "line 30\n", "line thirty\n")})
    series = make_series(
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
        run(pins, release_dir, series, dest)
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


def test_patch_escaping_the_tree_is_refused_before_writing(pins, release_dir, tmp_path):
    series = tmp_path / "evil"
    series.mkdir()
    (series / "series").write_text("0001-evil.patch\n")
    (series / "0001-evil.patch").write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: x <x@example.com>\nDate: Thu, 1 Jan 2026 00:00:00 +0000\nSubject: evil\n\n"
        "---\ndiff --git a/../outside.txt b/../outside.txt\nnew file mode 100644\n"
        "index 0000000..e69de29\n--- /dev/null\n+++ b/../outside.txt\n@@ -0,0 +1 @@\n+pwned\n"
    )
    with pytest.raises(UnsafePathError, match="escapes"):
        run(pins, release_dir, series, tmp_path / "tree")
    assert not (tmp_path / "outside.txt").exists()
    assert not (tmp_path / "tree").exists()


def test_status_and_unapply(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "tree"
    run(pins, release_dir, good_series, dest)
    git(dest, "reset", "-q", "--hard", "HEAD~1")
    st = apply.status(dest, good_series, pins)
    assert [(p.name, p.applied) for p in st.patches] == [
        ("0001-step-1.patch", True),
        ("0002-step-2.patch", False),
    ]
    version, n = apply.unapply(dest)
    assert (version, n) == ("9.9.0", 1)
    assert (dest / "vllm/model.py").read_text() == BASE["vllm/model.py"]


def test_unknown_release_lists_pinned(pins, release_dir, good_series, tmp_path):
    with pytest.raises(ConfigError, match=r"unknown release '1\.2\.3'; pinned: 9\.8\.0, 9\.9\.0"):
        apply.apply("1.2.3", dest=tmp_path / "t", series_dir=good_series, pins=pins)


def test_status_of_a_plain_folder_is_a_clear_error(tmp_path):
    with pytest.raises(TreeError, match="not a vpatch tree"):
        apply.status(tmp_path)


def test_release_without_series_says_it_needs_none(pins, tmp_path):
    with pytest.raises(ConfigError, match=r"vLLM 10\.0\.0 needs no patches \(status upstream"):
        apply.apply("10.0.0", dest=tmp_path / "t", pins=pins)
    assert not (tmp_path / "t").exists()
