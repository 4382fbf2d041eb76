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
above this package sees a third-party error.

The package's modules: run (the hermetic runner and error conversion),
repo (repositories, history, git am, format-patch) and merge (folders,
3-way merges, ports, branches); what each lists in __all__ is gitutil's.
A test that replaces a function replaces it where it is defined
(gitutil.repo.am), which is where the package's own callers find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .merge import *  # noqa: F403
from .repo import *  # noqa: F403
from .run import *  # noqa: F403

if TYPE_CHECKING:
    import git

    # The repository type callers hold (and pass back here); they never
    # import GitPython themselves.
    Repo = git.Repo
else:

    def __getattr__(name: str) -> object:
        """`gitutil.Repo` at run time too (a test's annotation), still lazily."""
        if name == "Repo":
            from .run import git

            return git.Repo
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
