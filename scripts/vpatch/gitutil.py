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
    # and none of the user's format.* / diff.* settings: the diff shape is fixed
    # (3 lines of context, myers, a/ b/ prefixes, no order file), and no
    # base-commit trailer, threading, cover letter, notes or extra headers.
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
# format-patch only: settings no command-line option overrides.
FORMAT_CONFIG = ("diff.suppressBlankEmpty=false",)
# The environment of format-patch: no global or system config at all, and
# GIT_DIFF_OPTS (which beats --unified) neutralised.
HERMETIC_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_COUNT": "0",
    "GIT_DIFF_OPTS": "",
    "GIT_EXTERNAL_DIFF": "",
}
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


def _env(date: str, who: tuple[str, str] = IDENTITY) -> dict[str, str]:
    name, email = who
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
    g = repo.git
    g.set_persistent_git_options(c=[*NEUTRAL_CONFIG, *FORMAT_CONFIG])
    with g.custom_environment(**HERMETIC_ENV):
        out = g.format_patch(*FORMAT_PATCH, "-1", sha, stdout_as_string=False)
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


# -- folders, 3-way merges, ports ---------------------------------------------


def apply_folder(folder: Path, patch: Path, context: int = 1) -> tuple[bool, str]:
    """Apply a patch to a plain folder (no repository needed), like `patch -p1`
    with fuzz: context may shrink to `context` lines. Returns (applied, git's
    verbose report, which names offsets and reduced context)."""
    g = git.Git(folder)
    # never let git discover a repository above the folder and patch that
    env = {"GIT_CEILING_DIRECTORIES": str(Path(folder).resolve().parent)}
    cmd = ["git", *_config_args(), "apply", "--verbose", f"-C{context}", str(patch)]
    status, out, err = g.execute(cmd, with_extended_output=True, with_exceptions=False, env=env)
    return status == 0, f"{out}\n{err}".strip()


def _config_args() -> list[str]:
    return [arg for kv in NEUTRAL_CONFIG for arg in ("-c", kv)]


def commit_folder(repo: git.Repo, folder: Path, message: str, date: str = EPOCH) -> str:
    """Commit the content of another folder as a new root commit, touching
    neither the work tree, the index nor HEAD. The commit id."""
    g = _git(repo)
    index = Path(repo.git_dir) / "vpatch-folder.index"
    try:
        with g.custom_environment(GIT_INDEX_FILE=str(index), GIT_WORK_TREE=str(folder)):
            g.add("-A", "--force", ".")
            tree = g.write_tree()
        with g.custom_environment(**_env(date)):
            return g.commit_tree(tree, "-m", message)
    except git.GitCommandError as e:
        raise _fail("commit of a folder", e) from None
    finally:
        index.unlink(missing_ok=True)


def switch(repo: git.Repo, branch: str, ref: str) -> None:
    """Check out ref as `branch` (created or reset), discarding local changes."""
    g = _git(repo)
    try:
        g.checkout("-q", "-f", "-B", branch, ref)
        g.clean("-fdq")
    except git.GitCommandError as e:
        raise _fail(f"checkout {ref}", e) from None


def am_3way(repo: git.Repo, patches: list[Path]) -> tuple[bool, str]:
    """`git am --3way` of patches; the 3-way fallback needs the preimage blobs
    in the repository. On failure the am session is left for a person
    (`git am --continue`). Returns (done, git's output)."""
    return _am(repo, _patch_date(patches[0]), "--keep-cr", "--3way", *map(str, patches))


def am_continue(repo: git.Repo, date: str = EPOCH) -> tuple[bool, str]:
    """`git am --continue` after the conflicts were resolved and added."""
    return _am(repo, date, "--continue")


def _am(repo: git.Repo, date: str, *args: str) -> tuple[bool, str]:
    env = _env(date)
    for k in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE"):
        env.pop(k)  # the author comes from the patch
    # diff3 markers show the base too: what a person resolving needs to see
    cmd = ["git", *_config_args(), "-c", "merge.conflictStyle=diff3", "am", *args]
    with repo.git.custom_environment(**env):
        status, out, err = _git(repo).execute(cmd, with_extended_output=True, with_exceptions=False)
    return status == 0, f"{out}\n{err}".strip()


def resolve_insertions(repo: git.Repo) -> bool:
    """Resolve the conflicts of a merge in progress when every one of them is
    two insertions at the same place (the base side is empty), by keeping
    ours then theirs, as appending to the same list on both sides needs.
    Anything else (a side changed or removed lines) is left alone: False."""
    paths = conflicted(repo)
    if not paths:
        return False
    g = _git(repo)
    merged = {}
    for path in paths:
        try:
            g.checkout("--conflict=diff3", "--", path)
        except git.GitCommandError:
            return False  # delete/modify and the like: no text to merge
        text = _union_insertions((Path(repo.working_tree_dir) / path).read_text())
        if text is None:
            return False
        merged[path] = text
    for path, text in merged.items():
        (Path(repo.working_tree_dir) / path).write_text(text)
        g.add("--", path)
    return True


def _union_insertions(text: str) -> str | None:
    out: list[str] = []
    lines = iter(text.splitlines(keepends=True))
    found = False
    for line in lines:
        if not line.startswith("<<<<<<< "):
            out.append(line)
            continue
        found = True
        side = {"ours": [], "base": [], "theirs": []}
        part, saw_base = "ours", False
        for inner in lines:
            if inner.startswith(">>>>>>> "):
                break
            if inner.startswith("||||||| "):
                part, saw_base = "base", True
            elif inner.rstrip("\r\n") == "=======":
                part = "theirs"
            else:
                side[part].append(inner)
        else:
            return None  # unterminated conflict
        if not saw_base or side["base"] or part != "theirs":
            return None
        out += side["ours"] + side["theirs"]
    return "".join(out) if found else None


def am_in_progress(repo: git.Repo) -> bool:
    return (Path(repo.git_dir) / "rebase-apply").exists()


def conflicted(repo: git.Repo) -> list[str]:
    """Paths with unresolved merge conflicts."""
    out = _git(repo).diff("--name-only", "--diff-filter=U")
    return [line for line in out.splitlines() if line]


def is_ancestor(repo: git.Repo, ref: str, tip: str = "HEAD") -> bool:
    try:
        return repo.is_ancestor(ref, tip)
    except git.GitCommandError:
        return False


def tags(repo: git.Repo, prefix: str = "") -> list[str]:
    return sorted(t.name for t in repo.tags if t.name.startswith(prefix))


# -- branches and messages (vpatch pr) ----------------------------------------


def branch(repo: git.Repo) -> str | None:
    """The checked-out branch, or None on a detached HEAD."""
    try:
        return repo.active_branch.name
    except TypeError:
        return None


def has_branch(repo: git.Repo, name: str) -> bool:
    return any(h.name == name for h in repo.heads)


def checkout(repo: git.Repo, ref: str) -> None:
    try:
        _git(repo).checkout("-q", ref)
    except git.GitCommandError as e:
        raise _fail(f"checkout {ref}", e) from None


def delete_branch(repo: git.Repo, name: str) -> None:
    _git(repo).branch("-D", "-q", name)


def remotes(repo: git.Repo) -> dict[str, str]:
    """{name: url} of the repository's remotes."""
    return {r.name: next(iter(r.urls), "") for r in repo.remotes}


def identity(repo: git.Repo | None = None) -> tuple[str, str] | None:
    """(user.name, user.email) from git's configuration (the repository's,
    else the user's), or None when either is unset."""
    cmd = repo.git if repo is not None else git.Git()
    try:
        return cmd.config("--get", "user.name"), cmd.config("--get", "user.email")
    except git.GitCommandError:
        return None


def store_blobs(repo: git.Repo, paths: list[Path]) -> list[str]:
    """Write the files' contents into the repository as blobs (what `git am
    --3way` needs to find a patch's preimage); their ids."""
    if not paths:
        return []
    return _git(repo).hash_object("-w", "--", *map(str, paths)).split()


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
    g = _git(repo)
    tip = repo.commit(base).hexsha
    try:
        for c, message, date in zip(olds, messages, dates, strict=True):
            with g.custom_environment(**_env(date, author)):
                tip = g.commit_tree(f"{c.sha}^{{tree}}", "-p", tip, "-m", message.rstrip("\n"))
        g.reset("-q", "--keep", tip)
    except git.GitCommandError as e:
        raise _fail("reword", e) from None
    return tip
