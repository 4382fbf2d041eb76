"""Everything that runs git, through GitPython. Project agnostic: nothing
here knows about vLLM, releases or series.

Commits made here carry a fixed identity and dates taken from their input,
so the same tree and patches give the same commit ids on any machine, and
`format_patch` gives the same bytes on any git version.

The caller's environment cannot change what git does here (after
Electron's script/lib/git.py, every flag explained below):
  * every command runs with the repository's own locations pinned
    (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_OBJECT_DIRECTORY, ...: the
    variables `git rev-parse --local-env-vars` lists), so a GIT_DIR or
    GIT_OBJECT_DIRECTORY in the caller's environment cannot redirect us;
  * no terminal prompt (GIT_TERMINAL_PROMPT=0, GIT_ASKPASS unset-equivalent);
  * no user or system configuration (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=
    /dev/null, GIT_CONFIG_PARAMETERS/COUNT emptied): a user's
    `apply.whitespace=fix`, `am.messageid`, `commit.cleanup` or
    `core.autocrlf` would change the bytes we make. Only `identity()`
    reads the user's configuration, for a sign-off.
GitPython merges its per-command environment over os.environ, so these
values always win over the caller's.

GitPython's and gitdb's exceptions (and the ValueError GitPython raises for
a missing or broken ref) become GitError where they are raised: nothing
above this module sees a third-party error.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from .errors import GitError, PreflightError, VpatchError, disk_error

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

    def __getattr__(name: str) -> object:
        """`gitutil.Repo` at run time too (a test's annotation), still lazily."""
        if name == "Repo":
            return git.Repo
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def converts(what: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run a function with third-party errors turned into GitError
    ("git <what> failed: <git's last fatal/error line>") and OSError into
    DiskError."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except VpatchError:  # no git (require_git), or one of ours from inside
                raise
            except _third_party() as e:
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


# -- folders, 3-way merges, ports ---------------------------------------------


@converts("apply")
def apply_folder(
    folder: Path, patch: Path, context: int = 1, include: list[str] | None = None
) -> tuple[bool, str]:
    """Apply one patch to a plain folder (no repository needed), all of it or
    nothing, like `patch -p1`; with context < 3, with fuzz (context may
    shrink to that many lines). `include` limits the paths changed. Returns
    (applied, git's verbose report, which names offsets and reduced context,
    or the failure). Default context 1: `patch`'s fuzz 2. (One patch at a
    time: `git apply p1 p2` writes p1 even when p2 fails.)"""
    cmd = ["git", *_config_args(), "apply", "--verbose", f"-C{context}"]
    cmd += [f"--include={_glob_escape(f)}" for f in include or []]
    cmd.append(_here(patch))
    require_git()
    # a plain subprocess: no repository object needed, so GitPython is not loaded
    res = subprocess.run(
        cmd,
        cwd=folder,
        env={**os.environ, "LANGUAGE": "C", "LC_ALL": "C", **_folder_env(Path(folder))},
        capture_output=True,
        text=True,
    )
    return res.returncode == 0, f"{res.stdout}\n{res.stderr}".strip()


def apply_reason(report: str) -> str:
    """git apply's own reason from apply_folder's report: its
    `patch failed: <file>:<line>` line, else its first error."""
    lines = [ln.strip() for ln in report.splitlines() if ln.strip()] or ["git apply failed"]
    errors = [ln.removeprefix("error: ") for ln in lines if ln.startswith("error:")]
    failed = [e for e in errors if e.startswith("patch failed:")]
    return (failed or [e for e in errors if e != "while searching for:"] or lines[-1:])[0]


def _glob_escape(path: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in path)


@converts("commit of a folder")
def commit_folder(repo: git.Repo, folder: Path, message: str, date: str = EPOCH) -> str:
    """Commit the content of another folder as a new root commit, touching
    neither the work tree, the index nor HEAD. The commit id."""
    index = Path(repo.git_dir) / "vpatch-folder.index"
    try:
        with repo.git.custom_environment(GIT_INDEX_FILE=str(index), GIT_WORK_TREE=_here(folder)):
            repo.git.add("-A", "--force", ".")
            tree = repo.git.write_tree()
        with repo.git.custom_environment(**_who(date)):
            return str(repo.git.commit_tree(tree, "-m", message))
    finally:
        index.unlink(missing_ok=True)


@converts("checkout")
def switch(repo: git.Repo, branch: str, ref: str) -> None:
    """Check out ref as `branch` (created or reset), discarding local changes."""
    repo.git.checkout("-q", "-f", "-B", branch, ref)
    repo.git.clean("-fdq")


def am_3way(repo: git.Repo, patches: list[Path], date: str) -> tuple[bool, str]:
    """`git am --3way` of patches, the first committed at `date` (its author
    date; EPOCH when it has none); the 3-way fallback needs the preimage
    blobs in the repository. On failure the am session is left for a person
    (`git am --continue`). Returns (done, git's output)."""
    return _am(repo, date or EPOCH, "--keep-cr", "--3way", *map(_here, patches))


def am_continue(repo: git.Repo, date: str = EPOCH) -> tuple[bool, str]:
    """`git am --continue` after the conflicts were resolved and added."""
    return _am(repo, date, "--continue")


@converts("am")
def _am(repo: git.Repo, date: str, *args: str) -> tuple[bool, str]:
    cmd = ["git", *_config_args(), "am", *args]
    with repo.git.custom_environment(**_who(date, author=False)):
        status, out, err = repo.git.execute(cmd, with_extended_output=True, with_exceptions=False)
    return status == 0, f"{out}\n{err}".strip()


@converts("checkout --conflict=diff3")
def conflict_texts(repo: git.Repo) -> dict[str, str] | None:
    """The text of every conflicted path of a merge in progress, each conflict
    written out in diff3 form (ours, base, theirs); None when nothing is
    conflicted or a path has no text to merge (delete/modify and the like)."""
    paths = conflicted(repo)
    if not paths:
        return None
    top = Path(str(repo.working_tree_dir))
    out = {}
    for path in paths:
        try:
            repo.git.checkout("--conflict=diff3", "--", path)
        except git.GitCommandError:
            return None
        out[path] = (top / path).read_text()
    return out


@converts("add")
def mark_resolved(repo: git.Repo, texts: dict[str, str]) -> None:
    """Write each conflicted path's merged text and mark it resolved."""
    top = Path(str(repo.working_tree_dir))
    for path, text in texts.items():
        (top / path).write_text(text)
        repo.git.add("--", path)


def am_in_progress(repo: git.Repo) -> bool:
    return (Path(repo.git_dir) / "rebase-apply").exists()


@converts("diff")
def conflicted(repo: git.Repo) -> list[str]:
    """Paths with unresolved merge conflicts."""
    out = repo.git.diff("--name-only", "--diff-filter=U")
    return [line for line in out.splitlines() if line]


@converts("merge-base --is-ancestor")
def is_ancestor(repo: git.Repo, ref: str, tip: str = "HEAD") -> bool:
    """Whether ref is an ancestor of tip: no when either names no commit;
    GitError when git cannot tell (a damaged object), rather than a silent no."""
    if not (_names_something(repo, ref) and _names_something(repo, tip)):
        return False
    return bool(repo.is_ancestor(ref, tip))  # type: ignore[arg-type]  # refs work too


def _names_something(repo: git.Repo, name: str) -> bool:
    """Whether a name resolves to an object id (without reading the object:
    a damaged one still resolves, and reading it is what fails)."""
    try:
        repo.git.rev_parse("--verify", "--quiet", "--end-of-options", name)
    except git.GitCommandError:
        return False
    return True


@converts("tag --list")
def tags(repo: git.Repo, prefix: str = "") -> list[str]:
    return sorted(t.name for t in repo.tags if t.name.startswith(prefix))


# -- branches and messages (vpatch pr) ----------------------------------------


@converts("branch")
def branch(repo: git.Repo) -> str | None:
    """The checked-out branch, or None on a detached HEAD."""
    try:
        return str(repo.active_branch.name)
    except TypeError:
        return None


@converts("branch --list")
def has_branch(repo: git.Repo, name: str) -> bool:
    return any(h.name == name for h in repo.heads)


@converts("checkout")
def checkout(repo: git.Repo, ref: str) -> None:
    repo.git.checkout("-q", ref)


@converts("branch -D")
def delete_branch(repo: git.Repo, name: str) -> None:
    repo.git.branch("-D", "-q", name)


@converts("remote")
def remotes(repo: git.Repo) -> dict[str, str]:
    """{name: url} of the repository's remotes."""
    return {r.name: next(iter(r.urls), "") for r in repo.remotes}


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


@converts("hash-object")
def store_blobs(repo: git.Repo, paths: list[Path]) -> list[str]:
    """Write the files' contents into the repository as blobs (what `git am
    --3way` needs to find a patch's preimage); their ids."""
    if not paths:
        return []
    return list(repo.git.hash_object("-w", "--", *map(_here, paths)).split())


@converts("commit-tree")
def reword(
    repo: git.Repo, base: str, messages: list[str], author: tuple[str, str], dates: list[str]
) -> str:
    """Make the commits of base..HEAD again, oldest first, with the same trees
    and these messages, authored and committed by `author` at these dates,
    and move the checked-out branch to them. The new tip (the same inputs
    give the same ids)."""
    olds = commits(repo, base)
    if olds is None or len(olds) != len(messages) or len(dates) != len(messages):
        raise GitError(f"reword: {base} is not under HEAD, or the messages do not fit")
    tip = str(repo.commit(base).hexsha)
    for c, message, date in zip(olds, messages, dates, strict=True):
        with repo.git.custom_environment(**_who(date, author)):
            tip = str(
                repo.git.commit_tree(f"{c.sha}^{{tree}}", "-p", tip, "-m", message.rstrip("\n"))
            )
    repo.git.reset("-q", "--keep", tip)
    return tip


@contextlib.contextmanager
def quiet_errors() -> Iterator[None]:
    """For callers that probe with GitPython objects directly: convert."""
    try:
        yield
    except _third_party() as e:
        raise GitError(f"git failed: {_message(e)}") from None
