"""gitutil/repo.py: a baseline commit, git am of each patch, what history
and refs answer, format-patch and patch ids, the identity of a sign-off."""

from __future__ import annotations

import re

from support import commit_tree, git, write_tree
from support.gitenv import history
from vpatch import gitutil, quilt


def test_baseline_commits_a_plain_folder_and_tags_a_checkout(tmp_path):
    folder = write_tree(tmp_path / "plain", {"a.py": "a\n", "PARTIAL": ""})
    repo = gitutil.baseline(folder, "vLLM 1.0 (x)", "base", exclude=("PARTIAL",))
    assert git(folder, "log", "--format=%s").split("\n")[0] == "vLLM 1.0 (x)"
    assert git(folder, "ls-files").split() == ["a.py"]
    assert gitutil.tag_sha(repo, "base") == gitutil.head(repo)
    ids, _ = history(tmp_path / "checkout")  # has commits: tagged where it is, nothing made
    again = gitutil.baseline(tmp_path / "checkout", "unused", "base")
    assert gitutil.head(again) == ids[1] == gitutil.tag_sha(again, "base")


def test_am_each_says_each_and_stops_at_the_first_that_fails(tmp_path):
    ids, patch = history(tmp_path / "from")
    (tmp_path / "p.patch").write_bytes(patch)
    git(tmp_path / "from", "reset", "-q", "--hard", ids[0])
    repo = gitutil.open_repo(tmp_path / "from")
    said: list[str] = []
    date = quilt.parse(tmp_path / "p.patch").date
    todo = [("0001-a.patch", tmp_path / "p.patch", date)] * 2  # the second cannot apply
    assert gitutil.am_each(repo, todo, said.append) == 1
    assert said == ["applying 0001-a.patch"] * 2 and gitutil.am_in_progress(repo)
    gitutil.reset_hard(repo, "HEAD")
    assert gitutil.head(repo) == ids[1]  # the first applied, with the author date: same id
    assert gitutil.am_each(repo, [], said.append) is None


def test_identity_reads_the_users_config_only_for_a_sign_off(monkeypatch, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert gitutil.identity() is None
    (home / ".gitconfig").write_text("[user]\n    name = Jane Doe\n    email = jane@example.com\n")
    assert gitutil.identity() == ("Jane Doe", "jane@example.com")
    repo = gitutil.init(write_tree(tmp_path / "t", {"a": "a\n"}))
    # a new tree gets a local identity only where the user has none
    assert gitutil.identity(repo) == ("Jane Doe", "jane@example.com")


def test_questions_about_missing_refs_are_answers_not_errors(tmp_path):
    top = write_tree(tmp_path / "t", {"a": "a\n"})
    repo = gitutil.init(top)
    assert gitutil.head(repo) is None  # unborn
    assert gitutil.branch(repo) == "main"
    sha = gitutil.commit_all(repo, "one")
    gitutil.tag(repo, "v1")
    assert gitutil.tag_sha(repo, "v1") == sha and gitutil.tag_sha(repo, "v2") is None
    assert gitutil.is_ancestor(repo, "v1") and not gitutil.is_ancestor(repo, "nope")
    assert gitutil.tags(repo, "v") == ["v1"] and gitutil.tags(repo, "x") == []
    assert gitutil.commits(repo, "v1") == []
    git(top, "checkout", "-q", "--detach")
    assert gitutil.branch(repo) is None
    assert gitutil.open_repo(top / "sub") is None and gitutil.open_repo(tmp_path) is None


def test_open_repo_wants_the_top_folder(tmp_path):
    top = commit_tree(tmp_path / "r", {"sub/a.txt": "a\n"})
    assert gitutil.open_repo(top) is not None
    assert gitutil.open_repo(top / "sub") is None  # inside another repository
    assert gitutil.open_repo(tmp_path / "missing") is None


def test_patch_ids_see_the_change_not_where_it_sits(tmp_path):
    """The same change at other line numbers, with other blob ids, has the
    same id; another change has another."""
    lines = "".join(f"line {i}\n" for i in range(1, 21))
    repo = gitutil.init(write_tree(tmp_path / "t", {"a": lines}))
    gitutil.commit_all(repo, "base")
    write_tree(tmp_path / "t", {"a": lines.replace("line 12\n", "line twelve\n")})
    sha = gitutil.commit_all(repo, "change")
    mail = gitutil.format_patch(repo, sha)
    moved = mail.replace(b"@@ -9,7 +9,7 @@", b"@@ -19,7 +19,7 @@")
    moved = re.sub(rb"index [0-9a-f]+\.\.[0-9a-f]+", b"index 1234567..89abcde", moved)
    assert moved.count(b"@@ -19,7") == 1 and b"index 1234567" in moved
    assert gitutil.patch_id(moved) == gitutil.patch_id(mail) != ""
    assert gitutil.patch_id(mail.replace(b"+line twelve", b"+line 12!")) != gitutil.patch_id(mail)
    assert gitutil.patch_id(b"no diff here\n") == ""


def test_files_at_reads_a_commit_not_the_work_tree(tmp_path):
    top = commit_tree(tmp_path / "r", {"vllm/a.py": "one\n", "vllm/b.py": "two\n", "x": "x\n"})
    git(top, "tag", "base")
    (top / "vllm/a.py").write_text("edited, not committed\n")
    repo = gitutil.open_repo(top)
    assert gitutil.files_at(repo, "base", lambda f: f.startswith("vllm/")) == {
        "vllm/a.py": "one\n",
        "vllm/b.py": "two\n",
    }
