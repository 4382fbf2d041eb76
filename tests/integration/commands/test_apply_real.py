"""Each pinned release's series applies to its real pinned source (downloaded
into the cache, sha256-verified), the patched files compile, and they pass the
release's own ruff settings with the ruff version its pre-commit config pins."""

from __future__ import annotations

import py_compile
import re
import subprocess
import sys
import tarfile
from functools import cache
from pathlib import Path

import pytest
from support import git, series_of
from vpatch import lock
from vpatch.commands import apply
from vpatch.sources import cache as downloads

pytestmark = pytest.mark.integration

PINS = lock.load()
SERIES = PINS.with_series()


@pytest.mark.parametrize("version", SERIES)
def test_series_applies_to_the_pinned_source(real_tree, version):
    dest = real_tree(version)
    st = apply.status(dest)
    assert st.patches and all(p.applied for p in st.patches), st.patches
    assert not st.extra and not st.dirty
    # the baseline is the release itself: its _version.py names the pinned commit
    text = (dest / "vllm" / "_version.py").read_text()
    assert PINS.get(version).commit in text


@pytest.mark.parametrize("version", SERIES)
def test_patched_files_compile(real_tree, version, tmp_path):
    dest = real_tree(version)
    for rel in series_of(PINS, PINS.get(version)).files:
        # the bytecode goes outside the tree: other tests read it clean
        py_compile.compile(str(dest / rel), doraise=True, cfile=str(tmp_path / "check.pyc"))


def _config_release(version: str) -> lock.Release:
    """The release whose pyproject/pre-commit settings apply: its own sdist, or
    for wheel-only releases the nearest release that has one."""
    rel = PINS.get(version)
    if "sdist" in rel.artifacts:
        return rel
    with_sdist = [PINS.get(v) for v in PINS.versions() if "sdist" in PINS.get(v).artifacts]
    return min(with_sdist, key=lambda r: (abs(r.key.release[1] - rel.key.release[1]), r.key))


@cache
def _ruff_config(version: str, where: Path) -> tuple[Path, str]:
    """pyproject.toml of the config release, and the ruff version it pins."""
    rel = _config_release(version)
    sdist = downloads.download(rel.artifact("sdist"))
    top = f"vllm-{rel.version}"
    with tarfile.open(sdist) as tar:
        pyproject = tar.extractfile(f"{top}/pyproject.toml").read()
        precommit = tar.extractfile(f"{top}/.pre-commit-config.yaml").read().decode()
    m = re.search(r"ruff-pre-commit\s*\n\s*rev:\s*v?([\d.]+)", precommit)
    assert m, "no ruff pin in .pre-commit-config.yaml"
    cfg = where / rel.version / "pyproject.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_bytes(pyproject)
    return cfg, m.group(1)


@cache
def _ruff(version: str) -> Path:
    """ruff at exactly the pinned version, installed once into the cache."""
    target = downloads.cache_dir() / "tools" / f"ruff-{version}"
    exe = target / "bin" / "ruff"
    if not exe.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--target",
                str(target),
                f"ruff=={version}",
            ],
            check=True,
        )
    return exe


def _findings(ruff: Path, cfg: Path, cwd: Path, files: list[str]) -> list[str]:
    out = subprocess.run(
        [
            str(ruff),
            "check",
            "--no-fix",
            "--no-cache",
            "--config",
            str(cfg),
            "--output-format",
            "concise",
            *files,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    return [
        line.split(":", 3)[-1]
        for line in out.stdout.splitlines()
        if re.match(r"\S+:\d+:\d+:", line)
    ]


def _formatted(ruff: Path, cfg: Path, cwd: Path, files: list[str]) -> set[str]:
    out = subprocess.run(
        [str(ruff), "format", "--check", "--no-cache", "--config", str(cfg), *files],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    return {f for f in files if f"Would reformat: {f}" not in out.stdout}


@pytest.mark.parametrize("version", SERIES)
def test_patched_files_pass_the_release_ruff(real_tree, version, tmp_path):
    dest = real_tree(version)
    cfg, pin = _ruff_config(version, tmp_path)
    ruff = _ruff(pin)
    files = series_of(PINS, PINS.get(version)).files
    tag = f"vpatch/base-{version}"
    # files the release has; the others the series adds (a test, say)
    old = sorted(set(git(dest, "ls-tree", "-r", "--name-only", tag, "--", *files).split()))
    base = tmp_path / "base"
    for f in old:
        (base / f).parent.mkdir(parents=True, exist_ok=True)
        (base / f).write_text(git(dest, "show", f"{tag}:{f}"))
    before = _findings(ruff, cfg, base, old) if old else []
    after = _findings(ruff, cfg, dest, files)
    new = sorted(set(after) - set(before))
    assert not new, f"ruff {pin} finds new problems: {new}"
    formatted = _formatted(ruff, cfg, base, old) if old else set()
    assert formatted | (set(files) - set(old)) <= _formatted(ruff, cfg, dest, files)
