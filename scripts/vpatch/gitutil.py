"""Everything that runs git, through GitPython. Project agnostic: nothing
here knows about vLLM, releases or series.

Commits made here carry a fixed identity and dates taken from their input,
so the same tree and patches give the same commit ids on any machine, and
`format_patch` gives the same bytes on any git version.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import git

from .errors import GitError

IDENTITY = ("vpatch", "vpatch@users.noreply.github.com")
EPOCH = "2000-01-01T00:00:00+00:00"  # baseline commits: content decides their id

# Options that make `git format-patch` output independent of the user's git
# config and git version (after Electron's script/lib/git.py): no version
# signature, no diffstat, full blob ids, zero "From" hash, no rename guessing.
FORMAT_PATCH = (
    "--stdout",
    "--keep-subject",
    "--no-stat",
    "--no-signature",
    "--zero-commit",
    "--full-index",
    "--no-renames",
    "--no-color",
    "--encoding=UTF-8",
)
NEUTRAL_CONFIG = (
    "core.quotepath=true",
    "diff.noprefix=false",
    "diff.mnemonicprefix=false",
    "diff.relative=false",
    "format.signoff=false",
    "commit.gpgsign=false",
    "tag.gpgsign=false",
)


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    message: str
    author_date: str


def _git(repo: git.Repo) -> git.Git:
    cmd = repo.git
    cmd.set_persistent_git_options(c=list(NEUTRAL_CONFIG))
    return cmd


def _env(date: str) -> dict[str, str]:
    name, email = IDENTITY
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
        "GIT_COMMITTER_DATE": date,
    }


def _fail(what: str, e: git.GitCommandError) -> GitError:
    err = (e.stderr or e.stdout or "").strip().splitlines()
    tail = err[-1].strip() if err else str(e)
    return GitError(f"git {what} failed: {tail}")


def open_repo(path: Path) -> git.Repo | None:
    """The repository whose top level is path, or None."""
    try:
        repo = git.Repo(path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    if Path(repo.working_tree_dir).resolve() != path.resolve():
        return None  # path is inside some other repository, not one of its own
    return repo


def init(path: Path) -> git.Repo:
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as cfg:
        cfg.set_value("core", "autocrlf", "false")
        # a local identity, so a person can commit in the tree straight away
        if not repo.config_reader().has_option("user", "name"):
            cfg.set_value("user", "name", IDENTITY[0])
            cfg.set_value("user", "email", IDENTITY[1])
    return repo


def commit_all(repo: git.Repo, message: str, date: str = EPOCH) -> str:
    g = _git(repo)
    try:
        g.add("-A", "--force")
        with repo.git.custom_environment(**_env(date)):
            g.commit("--allow-empty", "--no-verify", "-q", "-m", message)
    except git.GitCommandError as e:
        raise _fail("commit", e) from None
    return repo.head.commit.hexsha


def tag(repo: git.Repo, name: str, ref: str = "HEAD") -> None:
    _git(repo).tag("-f", name, ref)


def tag_sha(repo: git.Repo, name: str) -> str | None:
    try:
        return repo.commit(name).hexsha
    except (git.BadName, ValueError):
        return None


def head(repo: git.Repo) -> str | None:
    try:
        return repo.head.commit.hexsha
    except ValueError:
        return None


def dirty(repo: git.Repo) -> list[str]:
    """Paths with uncommitted changes, untracked files included."""
    out = _git(repo).status("--porcelain", "--untracked-files=all")
    return [line[3:] for line in out.splitlines() if line.strip()]


def commits(repo: git.Repo, base: str, tip: str = "HEAD") -> list[Commit]:
    """Commits in base..tip, oldest first; None when base is not an ancestor."""
    if not repo.is_ancestor(base, tip):
        return None
    out = []
    for c in repo.iter_commits(f"{base}..{tip}", reverse=True, first_parent=True):
        out.append(Commit(c.hexsha, c.summary, c.message, c.authored_datetime.isoformat()))
    return out


def reset_hard(repo: git.Repo, ref: str) -> None:
    g = _git(repo)
    with contextlib.suppress(git.GitCommandError):
        g.am("--abort")
    g.reset("--hard", "-q", ref)
    g.clean("-fdq")


def am(repo: git.Repo, patch: Path) -> str:
    """Apply a format-patch file as one commit; the committer date is set to the
    author date, so the resulting commit id is reproducible."""
    date = _patch_date(patch)
    env = _env(date)
    for k in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE"):
        env.pop(k)  # the author comes from the patch
    try:
        with repo.git.custom_environment(**env):
            _git(repo).am("--keep-cr", "--no-3way", "-q", str(patch))
    except git.GitCommandError as e:
        raise _fail(f"am {patch.name}", e) from None
    return repo.head.commit.hexsha


def _patch_date(patch: Path) -> str:
    with open(patch, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("Date: "):
                return line[6:].strip()
            if not line.strip():
                break
    return EPOCH


def apply_check(repo: git.Repo, patch: Path) -> str:
    """'' when patch applies cleanly to the work tree, else git's complaint."""
    try:
        _git(repo).apply("--check", "--verbose", str(patch))
    except git.GitCommandError as e:
        return (e.stderr or "").strip()
    return ""


def format_patch(repo: git.Repo, sha: str) -> bytes:
    """The commit as a mail, byte-identical across machines and git versions."""
    out = _git(repo).format_patch(*FORMAT_PATCH, "-1", sha, stdout_as_string=False)
    return out if out.endswith(b"\n") else out + b"\n"


def clone_tag(url: str, tag_name: str, dest: Path) -> str:
    """Shallow clone of one tag into the empty folder dest; the commit id."""
    try:
        repo = git.Repo.clone_from(
            url,
            dest,
            multi_options=[f"--branch={tag_name}", "--depth=1", "--quiet"],
            env={"GIT_TERMINAL_PROMPT": "0", **os.environ},
        )
    except git.GitCommandError as e:
        raise _fail(f"clone {url} {tag_name}", e) from None
    return repo.head.commit.hexsha
