"""Shared fixtures: small synthetic releases, trees and series, made with
plain git so the tests check vpatch against git itself."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from vpatch import lock

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_AUTHOR_DATE": "2026-01-02T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_COMMITTER_DATE": "2026-01-02T00:00:00+00:00",
}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout


DEP3 = """
Description: {subject}
Origin: vendor
Forwarded: not-needed
Applied-Upstream: 0.18.0
Last-Update: 2026-11-29
"""


def make_series(tmp: Path, base: dict[str, str], steps: list[tuple[str, dict[str, str]]]) -> Path:
    """A series folder: each step (subject, {path: new text}) becomes one
    format-patch file, made by committing the change on top of `base`."""
    work = tmp / "series-work"
    work.mkdir()
    git(work, "init", "-q")
    for path, text in base.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    git(work, "add", "-A")
    git(work, "commit", "-qm", "base")
    out = tmp / "series"
    out.mkdir()
    names = []
    for i, (subject, changes) in enumerate(steps, 1):
        for path, text in changes.items():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(text)
        git(work, "add", "-A")
        git(work, "commit", "-qm", subject + "\n" + DEP3.format(subject=subject))
        name = f"{i:04d}-step-{i}.patch"
        patch = git(work, "format-patch", "--stdout", "--keep-subject", "--no-signature", "-1")
        (out / name).write_text(patch)
        names.append(name)
    (out / "series").write_text("\n".join(names) + "\n")
    return out


BASE = {
    "vllm/model.py": "".join(f"line {i}\n" for i in range(1, 41)),
    "vllm/config.py": "allow = ['llama']\n",
    "README.md": "tiny\n",
}


def change(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


@pytest.fixture
def release_dir(tmp_path: Path) -> Path:
    """A local folder standing in for a release's source."""
    src = tmp_path / "release"
    for path, text in BASE.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_text(text)
    return src


@pytest.fixture
def good_series(tmp_path: Path) -> Path:
    model = BASE["vllm/model.py"]
    return make_series(
        tmp_path,
        BASE,
        [
            ("model: first change", {"vllm/model.py": change(model, "line 5\n", "line five\n")}),
            ("config: allow deepseek", {"vllm/config.py": "allow = ['llama', 'deepseek']\n"}),
        ],
    )


@pytest.fixture
def pins(tmp_path: Path) -> lock.Lock:
    rel = lock.Release("9.9.0", "v9.9.0", "abc1234", "patched", "")
    old = lock.Release("9.8.0", "v9.8.0", "def5678", "patched", "")
    new = lock.Release("10.0.0", "v10.0.0", "0123456", "upstream", "")
    return lock.Lock({r.version: r for r in (rel, old, new)}, tmp_path / "VERSIONS.lock")
