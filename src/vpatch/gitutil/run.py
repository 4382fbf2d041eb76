"""How gitutil runs git (see the package's docstring): GitPython imported on
first use, the hermetic environment and configuration every command gets,
a repository's locations pinned, fixed identities and dates, and GitPython's
errors turned into GitError (converts)."""

from __future__ import annotations

import errno
import functools
import importlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ..errors import DiskError, GitError, PreflightError, VpatchError, disk_error

__all__ = [
    "EPOCH",
    "FORMAT_PATCH",
    "HERMETIC_ENV",
    "IDENTITY",
    "LOCAL_ENV",
    "NEUTRAL_CONFIG",
    "NO_GIT",
    "Commit",
    "converts",
    "require_git",
    "scrub_environ",
]

NO_GIT = (
    "git not found on PATH: install git (vpatch needs it to apply patches and to make "
    "and read vpatch trees)"
)


def require_git() -> None:
    """PreflightError unless the git GitPython would run is there: GitPython
    refuses to import without it, which is no bug of vpatch's."""
    if shutil.which(os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git") is None:
        raise PreflightError(NO_GIT)


class _GitPython:
    """GitPython, imported on first use: it takes ~0.1 s to import, and
    `vpatch install` / `check` / `doctor`, which run `git apply` on plain
    folders at most, should not pay it; and only once git is known to be
    there (require_git), so that every command that needs git says so in
    one line, and the ones that do not still work without it."""

    module: ModuleType | None = None

    def __getattr__(self, name: str) -> Any:
        if _GitPython.module is None:
            require_git()
            try:
                _GitPython.module = importlib.import_module("git")
            except ImportError as e:  # GitPython ran the git it found, and it failed
                why = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise PreflightError(f"the git on PATH does not run ({why}); install git") from None
        return getattr(_GitPython.module, name)


if TYPE_CHECKING:
    import git

    # The repository type callers hold (and pass back here); they never
    # import GitPython themselves.
    Repo = git.Repo
else:
    git = _GitPython()


IDENTITY = ("vpatch", "vpatch@users.noreply.github.com")
EPOCH = "2000-01-01T00:00:00+00:00"  # baseline commits: content decides their id

# Options that make `git format-patch` output independent of the user's git
# config and git version: no version signature, no diffstat, full blob ids,
# zero "From" hash, no rename guessing.
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
    # and none of format.* / diff.* settings: the diff shape is fixed (3 lines
    # of context, myers, a/ b/ prefixes, no order file), and no base-commit
    # trailer, threading, cover letter, notes or extra headers.
    "--no-base",
    "--no-thread",
    "--no-numbered",
    "--no-cover-letter",
    "--no-notes",
    "--no-to",
    "--no-cc",
    "--no-add-header",
    "--no-from",
    "--no-attach",
    "--unified=3",
    "--inter-hunk-context=0",
    "--diff-algorithm=myers",
    "--indent-heuristic",
    "--no-ext-diff",
    "--no-textconv",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--no-relative",
    f"-O{os.devnull}",
)
# Settings no command-line option overrides; passed as `-c` to every command.
NEUTRAL_CONFIG = (
    # no `git gc --auto` detached after a commit: in a tree of a vLLM's
    # thousands of files it deletes loose objects while vpatch removes the tree
    "gc.auto=0",
    "maintenance.auto=false",
    "core.quotepath=true",
    "core.autocrlf=false",
    "diff.noprefix=false",
    "diff.mnemonicprefix=false",
    "diff.relative=false",
    "diff.suppressBlankEmpty=false",
    "format.signoff=false",
    "commit.gpgsign=false",
    "tag.gpgsign=false",
    "am.messageid=false",
    "am.keepcr=false",
    "apply.whitespace=nowarn",
    "merge.conflictStyle=diff3",  # a person resolving a conflict needs the base
)
# The environment every command gets on top of the caller's (and winning).
HERMETIC_ENV = {
    "GIT_TERMINAL_PROMPT": "0",  # fail instead of asking for a password
    "GIT_ASKPASS": "true",  # ... and no askpass helper either (it answers "")
    "SSH_ASKPASS": "true",
    "GIT_CONFIG_NOSYSTEM": "1",  # no /etc/gitconfig
    "GIT_CONFIG_GLOBAL": os.devnull,  # no ~/.gitconfig
    "GIT_CONFIG_PARAMETERS": "",  # no `-c` smuggled in through the environment
    "GIT_CONFIG_COUNT": "0",
    "GIT_DIFF_OPTS": "",  # would beat --unified
    "GIT_EXTERNAL_DIFF": "",
    "GIT_NO_REPLACE_OBJECTS": "1",  # refs/replace/* must not change what we read
    "GIT_ALTERNATE_OBJECT_DIRECTORIES": "",
    "GIT_PREFIX": "",
    "GIT_EDITOR": "true",  # `git am --continue` must never open an editor
    # who git records in reflogs and `git am --abort` (the commits we make set
    # their own): a fixed identity, never the caller's GIT_AUTHOR_* / GIT_COMMITTER_*
    "GIT_AUTHOR_NAME": IDENTITY[0],
    "GIT_AUTHOR_EMAIL": IDENTITY[1],
    "GIT_COMMITTER_NAME": IDENTITY[0],
    "GIT_COMMITTER_EMAIL": IDENTITY[1],
}

P = ParamSpec("P")
R = TypeVar("R")


def _third_party() -> tuple[type[Exception], ...]:
    """What GitPython and gitdb raise (ValueError: a missing or broken ref);
    a function, so that naming them does not import GitPython before an
    error does."""
    return (git.exc.GitError, git.exc.ODBError, ValueError)  # gitdb's, as git.exc names them


def _unwrap(text: str, label: str) -> str:
    """GitPython's `\n  stderr: '<git's output>'` wrapper off a command's output."""
    text = text.strip()
    if text.startswith(f"{label}: '") and text.endswith("'"):
        return text[len(label) + 3 : -1]
    return text


def _message(e: BaseException) -> str:
    if isinstance(e, git.GitCommandError):
        out = _unwrap(str(e.stderr or ""), "stderr") or _unwrap(str(e.stdout or ""), "stdout")
        lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
        fatal = [ln for ln in lines if ln.startswith("fatal:")]
        errors = [ln for ln in lines if ln.startswith("error:")]
        return (fatal[:1] or errors[:1] or lines[-1:] or [f"exit status {e.status}"])[0]
    if isinstance(e, git.InvalidGitRepositoryError):
        return f"not a git repository: {e}"
    if isinstance(e, git.NoSuchPathError):
        return f"no such path: {e}"
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


# what git prints (strerror) when the file system refuses a write: the
# disk's errors, which a command reports as DiskError (exit 11), not git's
_DISK = tuple(os.strerror(n) for n in (errno.ENOSPC, errno.EDQUOT, errno.EROFS))


def _disk(e: BaseException) -> str | None:
    """git's line saying the file system refused a write, or None."""
    if not isinstance(e, git.GitCommandError):
        return None
    out = _unwrap(str(e.stderr or ""), "stderr") + "\n" + _unwrap(str(e.stdout or ""), "stdout")
    return next((ln.strip() for ln in out.splitlines() if ln.strip().endswith(_DISK)), None)


def converts(what: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run a function with third-party errors turned into GitError
    ("git <what> failed: <git's last fatal/error line>"), and OSError, or
    git saying the file system refused a write (no space, quota,
    read-only), into DiskError."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except VpatchError:  # no git (require_git), or one of ours from inside
                raise
            except _third_party() as e:
                if full := _disk(e):  # the disk's error, said by git: as every other one
                    raise DiskError(f"git {what}: {full}") from None
                raise GitError(f"git {what} failed: {_message(e)}") from None
            except OSError as e:
                raise disk_error(e, f"git {what}") from None

        return run

    return wrap


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    message: str
    author_date: str


def _repo_env(git_dir: Path, common: Path, work_tree: Path | None) -> dict[str, str]:
    """The hermetic settings plus a repository's own locations, each set to
    where git would find it by itself."""
    env = dict(HERMETIC_ENV)
    env.update(
        GIT_DIR=str(git_dir),
        GIT_COMMON_DIR=str(common),
        GIT_INDEX_FILE=str(git_dir / "index"),
        GIT_OBJECT_DIRECTORY=str(common / "objects"),
        GIT_GRAFT_FILE=str(common / "info" / "grafts"),
        GIT_SHALLOW_FILE=str(common / "shallow"),
        GIT_REPLACE_REF_BASE="refs/replace/",
    )
    if work_tree is not None:
        env["GIT_WORK_TREE"] = str(work_tree)
    return env


def _pin(repo: git.Repo) -> git.Repo:
    """Fix the repository's locations and the hermetic settings on its Git
    object, so every command of it (the persistent cat-file ones included)
    ignores the caller's GIT_DIR & co."""
    wt = Path(repo.working_tree_dir) if repo.working_tree_dir is not None else None
    repo.git.update_environment(**_repo_env(Path(repo.git_dir), Path(repo.common_dir), wt))
    repo.git.set_persistent_git_options(c=list(NEUTRAL_CONFIG))
    return repo


def _new_repo_env(top: Path) -> dict[str, str]:
    """For `git init` / `git clone` of a repository at top (top/.git)."""
    gd = top.resolve() / ".git"
    return _repo_env(gd, gd, top.resolve())


def _here(path: str | os.PathLike[str]) -> str:
    """path as git must be given it: absolute, against the caller's working
    directory. Git runs with the work tree as its working directory
    (GitPython's, and `git init DIR` / `git am` change into it), so a path
    relative to the caller's directory would name another place inside the
    tree: `vpatch apply --dest a/b` once left an empty a/b/a/b in it, and a
    relative --series made `git am` look for the patches in the tree. Every
    path this module hands to git goes through here (not resolve(): a
    symlinked folder keeps the name the caller gave it)."""
    return os.path.abspath(path)


def _folder_env(folder: Path) -> dict[str, str]:
    """For git run on a plain folder (no repository): no repository at all,
    neither discovered above the folder nor named by the environment."""
    env = dict(HERMETIC_ENV)
    env.update(
        GIT_DIR=os.devnull,
        GIT_WORK_TREE=_here(folder),
        GIT_INDEX_FILE=os.devnull,
        GIT_CEILING_DIRECTORIES=str(folder.resolve().parent),
    )
    return env


# What `git rev-parse --local-env-vars` lists: variables that point git at
# another repository, index, object store or configuration.
LOCAL_ENV = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
)


def scrub_environ() -> None:
    """Drop the caller's repository-redirecting variables from this process
    (the CLI does it first thing): every git we run, clones included, finds
    its repository where vpatch says. Repositories opened here also pin
    their locations (see _pin), for library callers."""
    for name in LOCAL_ENV:
        os.environ.pop(name, None)


def _config_args() -> list[str]:
    return [arg for kv in NEUTRAL_CONFIG for arg in ("-c", kv)]


def _who(date: str, who: tuple[str, str] = IDENTITY, author: bool = True) -> dict[str, str]:
    name, email = who
    env = {"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": date}
    if author:  # otherwise the author comes from the patch
        env.update(GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_AUTHOR_DATE=date)
    return env
