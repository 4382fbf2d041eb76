"""gitutil's repositories: open, make, commit, tag, read history, reset,
apply patches (git am), render commits (format-patch), patch ids, clones."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import GitError
from .run import (
    EPOCH,
    FORMAT_PATCH,
    HERMETIC_ENV,
    IDENTITY,
    Commit,
    _config_args,
    _here,
    _message,
    _new_repo_env,
    _pin,
    _third_party,
    _who,
    converts,
    require_git,
)

if TYPE_CHECKING:
    import git
else:
    from .run import git

__all__ = [
    "am",
    "am_each",
    "apply_check",
    "baseline",
    "clone_tag",
    "commit_all",
    "commits",
    "dirty",
    "files_at",
    "format_patch",
    "head",
    "identity",
    "init",
    "open_repo",
    "patch_id",
    "recover",
    "reset_hard",
    "tag",
    "tag_sha",
]


# -- repositories --------------------------------------------------------------


def open_repo(path: Path) -> git.Repo | None:
    """The repository whose top level is path, or None."""
    try:
        repo = git.Repo(path)
    except git.NoSuchPathError:
        return None
    except git.InvalidGitRepositoryError:
        if (Path(path) / ".git").exists():  # a repository git cannot read: say so
            raise GitError(
                f"{path}/.git is not a readable git repository (a damaged HEAD or config?)"
            ) from None
        return None
    except _third_party() as e:
        raise GitError(f"cannot open the git repository in {path}: {_message(e)}") from None
    if repo.working_tree_dir is None or Path(repo.working_tree_dir).resolve() != path.resolve():
        return None  # path is inside some other repository, not one of its own
    return _pin(repo)


@converts("init")
def init(path: Path) -> git.Repo:
    git.Git(path).execute(
        ["git", *_config_args(), "init", "-q", "--initial-branch=main", _here(path)],
        env=_new_repo_env(path),
    )
    repo = _pin(git.Repo(path))
    with repo.config_writer() as cfg:
        cfg.set_value("core", "autocrlf", "false")
        # nor does a person's git (`git am --continue` in a port tree) start
        # a detached gc, which would delete objects while vpatch removes the tree
        cfg.set_value("gc", "auto", "0")
        cfg.set_value("maintenance", "auto", "false")
        # a local identity, so a person can commit in the tree straight away
        if identity(repo) is None:
            cfg.set_value("user", "name", IDENTITY[0])
            cfg.set_value("user", "email", IDENTITY[1])
    return repo


@converts("commit")
def commit_all(
    repo: git.Repo, message: str, date: str = EPOCH, exclude: tuple[str, ...] = ()
) -> str:
    """Commit everything in the work tree (ignored files too) but `exclude`."""
    repo.git.add("-A", "--force", "--", ".", *(f":(exclude){x}" for x in exclude))
    with repo.git.custom_environment(**_who(date)):
        repo.git.commit("--allow-empty", "--no-verify", "-q", "--cleanup=whitespace", "-m", message)
    return repo.head.commit.hexsha


@converts("tag")
def tag(repo: git.Repo, name: str, ref: str = "HEAD") -> None:
    repo.git.tag("-f", name, ref)


def baseline(path: Path, message: str, name: str, exclude: tuple[str, ...] = ()) -> git.Repo:
    """The repository of a folder that now holds a release's source: made
    (init) unless it is a checkout already, its files committed as the first
    commit unless it has one (commit_all), and that commit tagged `name`."""
    repo = open_repo(path) or init(path)
    if head(repo) is None:
        commit_all(repo, message, exclude=exclude)
    tag(repo, name)
    return repo


def tag_sha(repo: git.Repo, name: str) -> str | None:
    """The commit a ref names, or None when there is none."""
    try:
        return str(repo.commit(name).hexsha)
    except (git.exc.BadName, git.exc.BadObject, ValueError, git.exc.GitError):
        return None


def head(repo: git.Repo) -> str | None:
    """The checked-out commit, or None on an unborn branch (HEAD names a
    branch with no commit yet). HEAD that names a commit git cannot read is
    a GitError, not an unborn branch."""
    try:
        return str(repo.head.commit.hexsha)
    except _third_party() as e:
        try:
            repo.git.rev_parse("--verify", "-q", "HEAD")
        except git.GitCommandError:
            if repo.head.is_detached or not Path(repo.git_dir, "HEAD").is_file():
                raise GitError(f"git cannot read HEAD: {_message(e)}") from None
            return None  # an unborn branch: the ref it names does not exist yet
        raise GitError(f"git cannot read HEAD: {_message(e)}") from None


@converts("status")
def dirty(repo: git.Repo, untracked: bool = True) -> list[str]:
    """Paths with uncommitted changes, untracked files included unless not."""
    # no optional locks: a status killed mid-way must not leave an index.lock behind
    with repo.git.custom_environment(GIT_OPTIONAL_LOCKS="0"):
        out = repo.git.status("--porcelain", f"--untracked-files={'all' if untracked else 'no'}")
    return [line[3:] for line in out.splitlines() if line.strip()]


@converts("log")
def commits(repo: git.Repo, base: str, tip: str = "HEAD") -> list[Commit] | None:
    """Commits in base..tip, oldest first; None when base is not an ancestor."""
    if not repo.is_ancestor(base, tip):  # type: ignore[arg-type]  # GitPython takes refs too
        return None
    out = []
    for c in repo.iter_commits(f"{base}..{tip}", reverse=True, first_parent=True):
        message = c.message if isinstance(c.message, str) else c.message.decode()
        summary = c.summary if isinstance(c.summary, str) else c.summary.decode()
        out.append(Commit(c.hexsha, summary, message, c.authored_datetime.isoformat()))
    return out


@converts("reset")
def recover(repo: git.Repo, ref: str) -> None:
    """Back to ref after a killed run: drop the lock files a killed git
    leaves behind and any `git am` session (even a half-made one), then
    reset --hard and clean. Only for a repository no other git can be
    running in (the caller holds its lock)."""
    gd = Path(repo.git_dir)
    stale = [gd / f"{n}.lock" for n in ("index", "HEAD", "ORIG_HEAD", "packed-refs", "config")]
    for lock in [*stale, *(gd / "refs").rglob("*.lock")]:
        lock.unlink(missing_ok=True)
    with contextlib.suppress(git.GitCommandError):
        repo.git.am("--quit")
    shutil.rmtree(gd / "rebase-apply", ignore_errors=True)
    repo.git.reset("--hard", "-q", ref)
    repo.git.clean("-fdq")


@converts("reset")
def reset_hard(repo: git.Repo, ref: str) -> None:
    """Back to ref, with no `git am` in progress and no untracked files."""
    with contextlib.suppress(git.GitCommandError):
        repo.git.am("--abort")
    repo.git.reset("--hard", "-q", ref)
    repo.git.clean("-fdq")


@converts("am")
def am(repo: git.Repo, patch: Path, date: str) -> str:
    """Apply a format-patch file as one commit; the committer date is its
    author date (`date`, its Date header: quilt.Patch.date; EPOCH when it has
    none), so the resulting commit id is reproducible."""
    with repo.git.custom_environment(**_who(date or EPOCH, author=False)):
        repo.git.am("--keep-cr", "--no-3way", "-q", _here(patch))
    return str(repo.head.commit.hexsha)


def am_each(
    repo: git.Repo, patches: list[tuple[str, Path, str]], say: Callable[[str], None]
) -> int | None:
    """am() each (name, file, author date) in turn, saying `applying NAME`:
    None when all applied, else the index of the first that does not (its
    am session left for the caller to end: reset_hard)."""
    for i, (name, patch, date) in enumerate(patches):
        say(f"applying {name}")
        try:
            am(repo, patch, date)
        except GitError:
            return i
    return None


@converts("apply --check")
def apply_check(repo: git.Repo, patch: Path) -> str:
    """'' when patch applies cleanly to the work tree, else git's complaint."""
    status, _, err = repo.git.execute(
        ["git", *_config_args(), "apply", "--check", "--verbose", _here(patch)],
        with_extended_output=True,
        with_exceptions=False,
    )
    return "" if status == 0 else str(err).strip()


@converts("ls-tree")
def files_at(repo: git.Repo, ref: str, wanted: Callable[[str], bool]) -> dict[str, str]:
    """{path: text} of the files in commit ref whose path `wanted` takes,
    read from git's objects (the work tree may hold anything)."""
    names = repo.git.ls_tree("-r", "-z", "--name-only", ref).split("\0")
    out = {}
    for name in filter(None, names):
        if wanted(name):
            data = repo.git.cat_file(
                "blob", f"{ref}:{name}", stdout_as_string=False, strip_newline_in_stdout=False
            )
            assert isinstance(data, bytes)
            out[name] = data.decode(errors="replace")
    return out


@converts("format-patch")
def format_patch(repo: git.Repo, sha: str) -> bytes:
    """The commit as a mail, byte-identical across machines and git versions."""
    out = repo.git.format_patch(*FORMAT_PATCH, "-1", sha, stdout_as_string=False)
    assert isinstance(out, bytes)
    return out if out.endswith(b"\n") else out + b"\n"


@converts("patch-id")
def patch_id(patch: bytes) -> str:
    """`git patch-id --stable` of a patch (a format-patch mail or a diff):
    the change itself, whatever its hunks' line numbers, its blob ids and
    whitespace; '' for a patch that changes nothing. No repository needed."""
    require_git()
    res = subprocess.run(
        ["git", *_config_args(), "patch-id", "--stable"],
        input=patch,
        capture_output=True,
        env={**os.environ, **HERMETIC_ENV},
    )
    if res.returncode != 0:
        why = res.stderr.decode(errors="replace").strip().splitlines() or ["failed"]
        raise GitError(f"git patch-id failed: {why[-1]}")
    return res.stdout.decode(errors="replace").split(" ", 1)[0].strip()


@converts("clone")
def clone_tag(url: str, tag_name: str, dest: Path) -> str:
    """Shallow checkout of one tag into dest, which holds no repository (it
    may hold untracked files, as a `git clone` would refuse: a run's marker):
    the commit id. Like `git clone --depth=1 --branch=<tag>`: HEAD detached
    at the tag, the tag itself, remote `origin`."""
    env = _new_repo_env(dest)
    ref = f"refs/tags/{tag_name}"
    for cmd in (
        ["init", "-q", "--initial-branch=main", _here(dest)],
        ["fetch", "-q", "--depth=1", "--no-tags", "--", url, f"+{ref}:{ref}"],
        ["checkout", "-q", "--detach", ref],
        ["remote", "add", "origin", url],
    ):
        git.Git(dest).execute(["git", *_config_args(), *cmd], env=env)
    return str(_pin(git.Repo(dest)).head.commit.hexsha)


def identity(repo: git.Repo | None = None) -> tuple[str, str] | None:
    """(user.name, user.email) from git's configuration files (the
    repository's, else the user's and the system's: the one place vpatch reads
    them), or None when either is unset."""
    try:
        if repo is not None:
            reader = repo.config_reader()
        else:
            reader = git.GitConfigParser(git.config.get_config_path("global"), read_only=True)
        name = reader.get_value("user", "name", "")
        email = reader.get_value("user", "email", "")
    except (OSError, KeyError):
        return None
    except _third_party():
        return None
    return (str(name), str(email)) if name and email else None
