"""A hostile git environment (the caller's configuration, hooks and
identity, everything git reads) and a small history made with gitutil
alone, for the tests of gitutil."""

from __future__ import annotations

from pathlib import Path

from vpatch import gitutil

from support import write_tree

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
