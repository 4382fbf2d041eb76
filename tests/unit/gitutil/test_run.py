"""gitutil/run.py: git runs hermetic (the caller's GIT_DIR, configuration,
hooks, prompts and identity change nothing), paths are the caller's, no git
on PATH is one PreflightError, and every GitPython error is a GitError."""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import commit_tree, git, serve, write_tree
from support.gitenv import history, hostile
from vpatch import gitutil, quilt
from vpatch.errors import GitError


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


def test_no_automatic_gc_runs_in_our_trees(tmp_path):
    """A commit never starts `git gc --auto`: detached, it deletes loose
    objects while vpatch removes the tree (a carry's port tree, thousands of
    files, failed to tidy that way). The repo's own config asks for gc at
    the first loose object, in the foreground, so a gc would show here."""
    # gc --auto counts loose objects in objects/17/ only: put three there
    in_17 = [t for t in (f"{i}\n" for i in range(5000)) if _blob_id(t).startswith("17")][:3]
    write_tree(tmp_path, {f"f{i}.txt": t for i, t in enumerate(in_17)})
    repo = gitutil.init(tmp_path)
    git(tmp_path, "config", "gc.auto", "1")
    git(tmp_path, "config", "gc.autoDetach", "false")
    git(tmp_path, "config", "maintenance.auto", "true")
    gitutil.commit_all(repo, "base")
    (tmp_path / "f0.txt").write_text("changed\n")
    gitutil.commit_all(repo, "again")
    packs = list((tmp_path / ".git" / "objects" / "pack").glob("*.pack"))
    assert not packs and len(list((tmp_path / ".git" / "objects" / "17").iterdir())) == 3


def _blob_id(text: str) -> str:
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_a_persons_git_in_our_trees_starts_no_gc(tmp_path):
    """A person's own git in a tree vpatch made (`git am --continue` in the
    port tree) reads the tree's config: no gc there either. 30 loose objects
    in objects/17 are past git's default threshold (6700 / 256)."""
    in_17 = [t for t in (f"{i}\n" for i in range(20000)) if _blob_id(t).startswith("17")][:30]
    write_tree(tmp_path, {f"f{i}.txt": t for i, t in enumerate(in_17)})
    gitutil.init(tmp_path)
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "gc.autoDetach=false", "commit", "-qm", "a person's")
    assert not list((tmp_path / ".git" / "objects" / "pack").glob("*.pack"))


# 40 KB that do not compress on a file system of 64 KB: git's copy of them
# does not fit
FULL = """
import os
import sys
from pathlib import Path
from vpatch import gitutil
from vpatch.errors import VpatchError
top = Path(sys.argv[1]) / "tree"
top.mkdir()
(top / "big").write_bytes(os.urandom(40_000))
try:
    gitutil.baseline(top, "base", "vpatch/base")
except VpatchError as e:
    print(type(e).__name__, e.exit_code, e)
"""


def test_a_full_disk_is_a_disk_error_not_a_git_error(tmp_path):
    """A carry's work folder on a full disk gave exit 10 (git
    failed) where every other command's full disk gives 11 (DiskError):
    git's own "No space left on device" is the disk's error. A real one,
    a 64 KB tmpfs in a user namespace."""
    if subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("user namespaces are not available here (a tmpfs needs one)")
    where = tmp_path / "tiny"
    where.mkdir()
    script = 'mount -t tmpfs -o size=64k tmpfs "$0" && exec "$@"'
    cmd = ["unshare", "-rm", "sh", "-c", script, str(where), sys.executable, "-c", FULL, where]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("DiskError 11 git init: "), r.stdout
    assert r.stdout.strip().endswith("No space left on device"), r.stdout
    assert "stderr:" not in r.stdout, r.stdout
