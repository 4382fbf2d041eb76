"""gitutil/merge.py: a patch on a plain folder (all or nothing), a
conflicted merge's texts."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support import commit_tree, git, write_tree
from vpatch import gitutil


def test_a_folder_inside_a_repository_is_patched_as_a_plain_folder(tmp_path):
    outer = commit_tree(tmp_path / "outer", {"inner/a.py": "a\nb\nc\n"})
    patch = tmp_path / "p.patch"
    patch.write_text(
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    )
    ok, report = gitutil.apply_folder(outer / "inner", patch, 3)
    assert ok, report
    assert (outer / "inner/a.py").read_text() == "a\nB\nc\n"
    assert git(outer, "diff", "--cached", "--name-only") == ""  # the outer index untouched
    ok, report = gitutil.apply_folder(outer / "inner", patch, 3)  # applied already
    assert not ok and "patch does not apply" in report


def test_a_patch_applies_all_or_none(tmp_path):
    """A patch whose second file fails leaves the first file as it was too."""
    folder = write_tree(tmp_path / "f", {"a.py": "a\nb\nc\n", "b.py": "x\n"})
    both = tmp_path / "both.patch"
    both.write_text(
        "--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        "--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-y\n+z\n"
    )
    ok, report = gitutil.apply_folder(folder, both, 3)
    assert not ok and "patch failed: b.py:1" in report
    assert (folder / "a.py").read_text() == "a\nb\nc\n"


def _conflicted_merge(tmp_path: Path) -> Path:
    top = commit_tree(tmp_path / "r", {"list.txt": "head\ntail\n", "other.txt": "x\n"})
    git(top, "checkout", "-q", "-b", "theirs")
    (top / "list.txt").write_text("head\nb\ntail\n")
    git(top, "commit", "-qam", "theirs")
    git(top, "checkout", "-q", "-")
    (top / "list.txt").write_text("head\na\ntail\n")
    git(top, "commit", "-qam", "ours")
    merged = subprocess.run(["git", "merge", "-q", "theirs"], cwd=top, capture_output=True)
    assert merged.returncode != 0  # both sides inserted at one place: a conflict
    return top


def test_conflict_texts_are_diff3_and_mark_resolved_ends_them(tmp_path):
    top = _conflicted_merge(tmp_path)
    repo = gitutil.open_repo(top)
    assert repo is not None and gitutil.conflicted(repo) == ["list.txt"]
    texts = gitutil.conflict_texts(repo)
    assert texts is not None and list(texts) == ["list.txt"]
    assert "||||||| " in texts["list.txt"]  # the base side is written out
    gitutil.mark_resolved(repo, {"list.txt": "head\na\nb\ntail\n"})
    assert gitutil.conflicted(repo) == []
    assert (top / "list.txt").read_text() == "head\na\nb\ntail\n"


def test_no_conflict_texts_without_a_conflict(tmp_path):
    repo = gitutil.open_repo(commit_tree(tmp_path / "r", {"a.txt": "a\n"}))
    assert repo is not None and gitutil.conflict_texts(repo) is None
