"""Each pinned release's series applies to its real pinned source (downloaded
into the cache, sha256-verified), the patched files compile, and they pass the
release's own ruff settings with the ruff version its pre-commit config pins.

`vpatch apply` makes a whole tree (the sdist or wheel in a git repository,
then `git am` of the series) for the releases of TREES: every patch file
under patches/ goes through `git am` on a real tree at least once. The rest
of the checks run on every release with a series, on a tree of the files the
series touches alone (from the file cache, as `vpatch lint` checks a series:
vpatch.checkout.apply, the same `git am`); a whole tree costs 4-12 s, most of it
`git add` of 8,000 files, and 28 of them were a third of the unit tests'
time."""

from __future__ import annotations

import py_compile
import re
import subprocess
import sys
import tarfile
from functools import cache
from pathlib import Path

import pytest
from support import series_of
from vpatch import checkout, lock
from vpatch.commands import apply
from vpatch.sources import cache as downloads
from vpatch.sources.files import release_files

pytestmark = pytest.mark.integration

PINS = lock.load()
SERIES = PINS.with_series()


def _trees() -> list[str]:
    """The default release, the oldest, then, greedily, the release whose
    series holds the most patch files not yet covered, until every patch
    file of every series is."""
    files = {v: {p.path for p in series_of(PINS, v).patches} for v in SERIES}
    chosen = list(dict.fromkeys([PINS.default().version, SERIES[0]]))
    covered = set().union(*(files[v] for v in chosen))
    for _ in SERIES:
        left = {v: len(files[v] - covered) for v in SERIES}
        best = max(SERIES, key=lambda v: left[v])
        if not left[best]:
            break
        chosen.append(best)
        covered |= files[best]
    return chosen


TREES = _trees()


def test_trees_git_am_every_patch_file():
    every = {p.path for v in SERIES for p in series_of(PINS, v).patches}
    assert every == {p.path for v in TREES for p in series_of(PINS, v).patches}
    assert len(TREES) < len(SERIES)  # else the cheap checks below buy nothing


@pytest.mark.parametrize("version", TREES)
def test_series_applies_to_the_pinned_source(real_tree, version):
    dest = real_tree(version)
    st = apply.status(dest, pins=lock.load())
    assert st.patches and all(p.applied for p in st.patches), st.patches
    assert not st.extra and not st.dirty
    # the baseline is the release itself: its _version.py names the pinned commit
    text = (dest / "vllm" / "_version.py").read_text()
    assert PINS.get(version).commit in text


@pytest.fixture(scope="session")
def patched(tmp_path_factory):
    """patched(version): (the release's files the series touches, as
    released; the same files patched), made on first use. Tests only read
    them."""
    made: dict[str, tuple[Path, Path]] = {}

    def files(version: str) -> tuple[Path, Path]:
        if version not in made:
            rel, series = PINS.get(version), series_of(PINS, version)
            base = release_files(rel, set(series.files) | {"vllm/_version.py"})
            out = tmp_path_factory.mktemp("patched") / version
            checkout.apply(rel, series, out, source=str(base))
            made[version] = base, out
        return made[version]

    return files


@pytest.mark.parametrize("version", SERIES)
def test_series_applies_to_the_release_files(patched, version):
    base, out = patched(version)
    files = series_of(PINS, version).files
    assert all((out / f).is_file() for f in files)
    assert any((out / f).read_bytes() != _bytes(base / f) for f in files)
    # the files are the release's: its _version.py names the pinned commit
    assert PINS.get(version).commit in (base / "vllm" / "_version.py").read_text()


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


@pytest.mark.parametrize("version", SERIES)
def test_patched_files_compile(patched, version, tmp_path):
    _, out = patched(version)
    for rel in series_of(PINS, version).files:
        # the bytecode goes outside the folder: other tests read it clean
        py_compile.compile(str(out / rel), doraise=True, cfile=str(tmp_path / "check.pyc"))


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
    # `rev: vX.Y.Z`, or (newer vLLM) a commit: `rev: <sha>  # frozen: vX.Y.Z`
    m = re.search(
        r"ruff-pre-commit\s*\n\s*rev:\s*(?:[0-9a-f]{40}\s*#\s*frozen:\s*)?v?(\d[\d.]*)", precommit
    )
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
def test_patched_files_pass_the_release_ruff(patched, version, tmp_path):
    base, out = patched(version)
    cfg, pin = _ruff_config(version, tmp_path)
    ruff = _ruff(pin)
    files = series_of(PINS, version).files
    # files the release has; the others the series adds (a test, say)
    old = [f for f in files if (base / f).is_file()]
    before = _findings(ruff, cfg, base, old) if old else []
    after = _findings(ruff, cfg, out, files)
    new = sorted(set(after) - set(before))
    assert not new, f"ruff {pin} finds new problems: {new}"
    formatted = _formatted(ruff, cfg, base, old) if old else set()
    assert formatted | (set(files) - set(old)) <= _formatted(ruff, cfg, out, files)
