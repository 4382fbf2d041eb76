"""gitutil.py, the one module that runs git: hermetic (the caller's GIT_DIR,
configuration, prompts and identity change nothing), reproducible, and every
GitPython error arrives as vpatch.errors.GitError."""

import http.server
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import commit_tree, git, serve, write_tree
from vpatch import gitutil, quilt
from vpatch.errors import GitError

HOSTILE_CONFIG = """\
[user]
    name = someone else
    email = else@example.com
[commit]
    gpgsign = true
    cleanup = verbatim
[core]
    autocrlf = true
    hooksPath = {hooks}
    abbrev = 12
[diff]
    noprefix = true
    context = 9
    algorithm = patience
[format]
    signature = mine
    numbered = true
[am]
    messageid = true
[init]
    defaultBranch = trunk
"""


def failing_hooks(path: Path) -> Path:
    """Hooks that fail whatever git asks them."""
    path.mkdir(parents=True)
    for name in ("pre-commit", "commit-msg", "applypatch-msg", "pre-applypatch", "post-commit"):
        (path / name).write_text("#!/bin/sh\necho hook ran >&2\nexit 1\n")
        (path / name).chmod(0o755)
    return path


def hostile(monkeypatch, tmp_path: Path) -> None:
    """A caller whose user config, environment and `-c` settings would all
    change what git makes."""
    home = tmp_path / "home"
    home.mkdir()
    hooks = failing_hooks(tmp_path / "hooks")
    (home / ".gitconfig").write_text(HOSTILE_CONFIG.format(hooks=hooks))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'diff.mnemonicPrefix'='true' 'core.abbrev'='20'")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "diff.context")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "5")
    monkeypatch.setenv("GIT_DIFF_OPTS", "--unified=9")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "caller")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2031-05-05T00:00:00+00:00")


def history(top: Path) -> tuple[list[str], bytes]:
    """Made with gitutil alone: a baseline and one change; (the commit ids,
    the change as format-patch)."""
    write_tree(top, {"vllm/a.py": "".join(f"a{i}\n" for i in range(20)), "README": "r\n"})
    repo = gitutil.init(top)
    first = gitutil.commit_all(repo, "baseline")
    (top / "vllm/a.py").write_text("".join(f"a{i}\n" for i in range(20)).replace("a9", "nine"))
    second = gitutil.commit_all(repo, "a: nine", date="2026-01-02T00:00:00+00:00")
    return [first, second], gitutil.format_patch(repo, second)


def test_the_callers_configuration_and_identity_change_nothing(monkeypatch, tmp_path):
    plain = history(tmp_path / "plain")
    with monkeypatch.context() as m:
        hostile(m, tmp_path)
        made = history(tmp_path / "hostile")
        repo = gitutil.open_repo(tmp_path / "hostile")
        assert gitutil.branch(repo) == "main"
    assert made == plain  # the same commit ids and the same patch bytes
    assert b"\n--- a/vllm/a.py\n+++ b/vllm/a.py\n" in plain[1]
    assert b"\n-- \n" not in plain[1] and b"[PATCH" not in plain[1]
    author = git(tmp_path / "hostile", "log", "-1", "--format=%an <%ae> %cn")
    assert author.strip() == f"{gitutil.IDENTITY[0]} <{gitutil.IDENTITY[1]}> {gitutil.IDENTITY[0]}"


def test_am_runs_no_hooks_of_the_caller(monkeypatch, tmp_path):
    ids, patch = history(tmp_path / "from")
    (tmp_path / "p.patch").write_bytes(patch)
    git(tmp_path / "from", "checkout", "-q", ids[0])
    write_tree(
        tmp_path / "to", {"vllm/a.py": "".join(f"a{i}\n" for i in range(20)), "README": "r\n"}
    )
    with monkeypatch.context() as m:
        hostile(m, tmp_path)
        repo = gitutil.init(tmp_path / "to")
        gitutil.commit_all(repo, "baseline")
        sha = gitutil.am(repo, tmp_path / "p.patch", quilt.parse(tmp_path / "p.patch").date)
        assert gitutil.format_patch(repo, sha) == patch
    assert sha == ids[1]  # committer date = author date: the same id as the original


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


def test_a_callers_git_dir_cannot_redirect_commands(monkeypatch, tmp_path):
    other = commit_tree(tmp_path / "other", {"x.txt": "x\n"})
    before = git(other, "rev-parse", "HEAD")
    mine = write_tree(tmp_path / "mine", {"a.txt": "a\n"})
    with monkeypatch.context() as m:
        m.setenv("GIT_DIR", str(other / ".git"))
        m.setenv("GIT_WORK_TREE", str(other))
        m.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
        m.setenv("GIT_OBJECT_DIRECTORY", str(other / ".git" / "objects"))
        repo = gitutil.init(mine)
        sha = gitutil.commit_all(repo, "mine")
        (mine / "new.txt").write_text("n\n")
        assert gitutil.dirty(repo) == ["new.txt"]
        assert gitutil.head(gitutil.open_repo(mine)) == sha
    assert git(other, "rev-parse", "HEAD") == before
    assert git(other, "status", "--porcelain") == ""
    assert git(mine, "log", "--format=%s").split() == ["mine"]


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


class Locked(http.server.BaseHTTPRequestHandler):
    """A git server that wants a password."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_no_prompt_and_no_askpass_of_the_caller(monkeypatch, tmp_path):
    asked = tmp_path / "asked"
    askpass = tmp_path / "askpass.sh"
    askpass.write_text(f'#!/bin/sh\necho "$@" >> {asked}\necho secret\n')
    askpass.chmod(0o755)
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "1")
    monkeypatch.setenv("GIT_ASKPASS", str(askpass))
    monkeypatch.setenv("SSH_ASKPASS", str(askpass))
    (tmp_path / "dest").mkdir()
    with serve(Locked) as url, pytest.raises(GitError, match="^git clone failed: "):
        gitutil.clone_tag(url + "vllm.git", "v1.0", tmp_path / "dest")
    assert not asked.exists()


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


# -- errors ---------------------------------------------------------------------------


@pytest.fixture
def damaged(tmp_path) -> tuple[gitutil.Repo, str]:
    """A repository whose HEAD commit object is garbage; (repo, that id)."""
    top = commit_tree(tmp_path / "r", {"a.txt": "a\n"})
    (top / "a.txt").write_text("b\n")
    git(top, "commit", "-qam", "two")
    sha = git(top, "rev-parse", "HEAD").strip()
    obj = top / ".git" / "objects" / sha[:2] / sha[2:]
    obj.chmod(0o644)
    obj.write_bytes(b"garbage")
    return gitutil.open_repo(top), sha


def test_damaged_objects_are_git_errors(damaged):
    repo, sha = damaged
    for call in (
        lambda: gitutil.commits(repo, "HEAD~1"),
        lambda: gitutil.format_patch(repo, sha),
        lambda: gitutil.dirty(repo),
        lambda: gitutil.commit_all(repo, "three"),
        lambda: gitutil.reset_hard(repo, "HEAD"),
    ):
        with pytest.raises(GitError, match=r"^git [a-z -]+ failed: .*(corrupt|missing|bad)"):
            call()


def test_a_damaged_head_is_a_git_error_not_an_unborn_branch(damaged):
    repo, _ = damaged
    with pytest.raises(GitError):
        gitutil.head(repo)


@pytest.fixture
def one_commit(tmp_path) -> gitutil.Repo:
    repo = gitutil.init(write_tree(tmp_path / "t", {"a": "a\n"}))
    gitutil.commit_all(repo, "one")
    return repo


def test_git_command_errors_are_git_errors(one_commit):
    with pytest.raises(GitError, match="^git reset failed: "):
        gitutil.reset_hard(one_commit, "nope")
    with pytest.raises(GitError, match="^git tag failed: "):
        gitutil.tag(one_commit, "bad..name")
    with pytest.raises(GitError, match="^git checkout failed: "):
        gitutil.checkout(one_commit, "no-such-branch")
    with pytest.raises(GitError, match="^git branch -D failed: "):
        gitutil.delete_branch(one_commit, "no-such-branch")


def test_a_git_error_is_gits_own_fatal_line(one_commit):
    with pytest.raises(GitError) as e:
        gitutil.reset_hard(one_commit, "nope")
    assert str(e.value) == (
        "git reset failed: fatal: ambiguous argument 'nope': unknown revision or path not in "
        "the working tree."
    )
    with pytest.raises(GitError) as e:
        gitutil.tag(one_commit, "bad..name")
    assert str(e.value) == "git tag failed: fatal: 'bad..name' is not a valid tag name."


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


def test_environment_variables_named_by_git_are_scrubbed(monkeypatch):
    for name in gitutil.LOCAL_ENV:
        monkeypatch.setenv(name, "x")
    gitutil.scrub_environ()
    assert not [n for n in gitutil.LOCAL_ENV if n in os.environ]


def _dirs_and_files(top: Path) -> list[str]:
    return sorted(p.relative_to(top).as_posix() for p in top.rglob("*") if ".git" not in p.parts)


def test_paths_relative_to_the_caller_name_the_callers_files(monkeypatch, tmp_path):
    """git runs in the work tree (and `git init DIR` changes into DIR): every
    path gitutil hands it is the caller's, relative to the caller's working
    directory, and nothing lands inside the tree (no stray a/b/a/b)."""
    origin = commit_tree(tmp_path / "origin", {"x.txt": "a\n"})
    git(origin, "tag", "v1")
    git(origin, "checkout", "-q", "-b", "change")
    write_tree(origin, {"x.txt": "b\n"})
    git(origin, "commit", "-qam", "x: b")
    patch = tmp_path / "elsewhere" / "p" / "0001.patch"
    patch.parent.mkdir(parents=True)
    patch.write_text(git(origin, "format-patch", "--stdout", "-1"))
    folder = write_tree(tmp_path / "elsewhere" / "f" / "tree", {"x.txt": "a\n"})
    monkeypatch.chdir(tmp_path / "elsewhere")  # every path below is relative to here
    rel_patch, rel_folder = Path("p/0001.patch"), Path("f/tree")

    Path("a/b").mkdir(parents=True)  # as apply and port make it first
    repo = gitutil.init(Path("a/b"))
    assert _dirs_and_files(tmp_path / "elsewhere/a/b") == []  # no a/b/a/b
    write_tree(Path("a/b"), {"x.txt": "a\n"})
    gitutil.commit_all(repo, "base")
    assert gitutil.apply_check(repo, rel_patch) == ""
    gitutil.am(repo, rel_patch, gitutil.EPOCH)
    assert Path("a/b/x.txt").read_text() == "b\n"
    gitutil.reset_hard(repo, "HEAD~1")
    assert (
        gitutil.am_3way(repo, [rel_patch], gitutil.EPOCH)[0]
        and Path("a/b/x.txt").read_text() == "b\n"
    )
    blob = git(origin, "rev-parse", "v1:x.txt").strip()
    assert gitutil.store_blobs(repo, [rel_folder / "x.txt"]) == [blob]
    root = gitutil.commit_folder(repo, rel_folder, "the folder")
    assert git(Path("a/b"), "show", f"{root}:x.txt") == "a\n"
    assert gitutil.apply_folder(rel_folder, rel_patch)[0]
    assert (folder / "x.txt").read_text() == "b\n" and _dirs_and_files(folder) == ["x.txt"]

    Path("c/d").mkdir(parents=True)
    head = gitutil.clone_tag(str(origin), "v1", Path("c/d"))
    assert head == git(origin, "rev-parse", "v1^{commit}").strip()
    assert _dirs_and_files(tmp_path / "elsewhere/c/d") == ["x.txt"]  # no c/d/c/d
    assert sorted(os.listdir(tmp_path / "elsewhere")) == ["a", "c", "f", "p"]


# -- a merge's conflicts as text (checkout.union_insertions merges them) ------------


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


# -- no git on PATH; patch ids (issue 31) ----------------------------------------------------


NO_GIT_RUN = """
import sys
from pathlib import Path
from vpatch import gitutil
from vpatch.errors import PreflightError
for what, run in [
    ("open", lambda: gitutil.open_repo(Path(sys.argv[1]))),
    ("apply", lambda: gitutil.apply_folder(Path(sys.argv[1]), Path(sys.argv[1]) / "p")),
    ("patch-id", lambda: gitutil.patch_id(b"")),
]:
    try:
        run()
    except PreflightError as e:
        print(what, e)
"""


def test_no_git_on_path_is_a_preflight_error_naming_it(tmp_path):
    """GitPython refuses to import without git (`ImportError: Failed to
    initialize: Bad git executable`, vpatch's exit 70 before): every entry
    that runs git says so as a PreflightError, in a fresh process (one that
    never imported GitPython), and importing gitutil needs no git at all."""
    (tmp_path / "bin").mkdir()
    env = {**os.environ, "PATH": str(tmp_path / "bin")}
    env.pop("GIT_PYTHON_GIT_EXECUTABLE", None)
    r = subprocess.run(
        [sys.executable, "-c", NO_GIT_RUN, str(tmp_path)], capture_output=True, text=True, env=env
    )
    assert r.stderr == ""
    assert r.stdout.splitlines() == [f"{w} {gitutil.NO_GIT}" for w in ("open", "apply", "patch-id")]
    assert gitutil.NO_GIT.startswith("git not found on PATH: install git (vpatch needs it ")
    # a git that does not run (GitPython's import fails on it): said, too
    (tmp_path / "bin" / "git").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "bin" / "git").chmod(0o755)
    r = subprocess.run(
        [sys.executable, "-c", NO_GIT_RUN, str(tmp_path)], capture_output=True, text=True, env=env
    )
    assert r.stdout.splitlines()[0].startswith("open the git on PATH does not run (")


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
