"""vLLM's own tests, from a release's sdist: ``upstream/<release>/tests``; and
the tests a series adds to them (``upstream/<release>-series-<key>/tests``)."""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path, PurePosixPath

from packaging.version import Version
from vpatch import lock, quilt, sources

from . import REPO, cache
from .log import run
from .releases import pins
from .venvs import host_python


def tests_of(release: str) -> str:
    """The release whose sdist's tests are ``release``'s: its own, or, where
    vLLM published wheels only (no sdist in the lock), the tests of the next
    release with one (only files that run there, see test_releases.py)."""
    p = pins()
    with_sdist = [v for v in p.versions() if "sdist" in p.get(v).artifacts]
    if release in with_sdist:
        return release
    later = [v for v in with_sdist if Version(v) > Version(release)]
    return later[0] if later else release


def sdist(release: str) -> lock.Artifact | None:
    """The sdist whose tests are ``release``'s (tests_of), None if the lock
    has none."""
    return pins().get(tests_of(release)).artifacts.get("sdist")


def ensure(release: str) -> Path | None:
    """The folder holding the sdist's ``tests/``, or None without an sdist."""
    src = tests_of(release)
    art = sdist(release)
    if art is None:
        return None

    def make(out: Path) -> None:
        top = f"vllm-{src}/"
        with tarfile.open(sources.download(art)) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(top + "tests/")]
            for m in members:
                m.name = m.name[len(top) :]
            tar.extractall(out, members=members, filter="data")

    return cache.built(cache.root() / "upstream" / src, art.sha256, make, f"vLLM {src}'s own tests")


def series_tests(sdir: Path) -> list[str]:
    """The test files (``tests/**/test_*.py``) a series adds or changes in vLLM's
    own test tree: the regression test that goes upstream with a fix."""
    return [
        f
        for f in quilt.load(sdir).files
        if f.startswith("tests/") and PurePosixPath(f).name.startswith("test_")
    ]


def patched_tests(release: str, sdir: Path) -> Path:
    """``upstream/<release>-series-<key>/tests``: the release's own tests with
    the series applied (``vpatch apply`` on the sdist, then its tests/ kept)."""
    key = quilt.load(sdir).content_hash()[:12]

    def make(out: Path) -> None:
        tree = out / "tree"
        run(
            [host_python(), "-m", "vpatch.cli", "apply", release, "--series", sdir, "--dest", tree],
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )
        (tree / "tests").rename(out / "tests")
        shutil.rmtree(tree)

    return cache.built(
        cache.root() / "upstream" / f"{release}-series-{key}",
        key,
        make,
        f"vLLM {release}'s own tests with the series applied",
        prune=f"{release}-series-*",
    )
