"""gitutil's folders, 3-way merges and ports: a patch on a plain folder, a
folder committed into another repository, `git am --3way` and its
conflicts, branches, tags and messages (vpatch port, vpatch pr)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import GitError
from .repo import commits
from .run import (
    EPOCH,
    _config_args,
    _folder_env,
    _here,
    _message,
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
    "am_3way",
    "am_continue",
    "am_in_progress",
    "apply_folder",
    "apply_reason",
    "branch",
    "checkout",
    "commit_folder",
    "conflict_texts",
    "conflicted",
    "delete_branch",
    "has_branch",
    "is_ancestor",
    "mark_resolved",
    "quiet_errors",
    "remotes",
    "reword",
    "store_blobs",
    "switch",
    "tags",
]


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
