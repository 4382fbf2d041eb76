"""Shared fixtures: small synthetic releases, trees and series, made with
plain git so the tests check vpatch against git itself. The helpers they use
live in support.py."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from support import BASE, change, make_series, releases, write_tree
from vpatch import lock
from vpatch.commands import apply

# Started in the background (`cmd &` in a script, nohup), the tests inherit
# SIGINT ignored, as would every vpatch they start (an ignored signal
# survives exec): the Ctrl-C tests would wait out their timeouts. They stand
# for a terminal, where SIGINT raises; a handler, unlike SIG_IGN, is reset to
# the default at exec, so the children get SIGINT back too.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# support.releases tells a test's run from collection by PYTEST_CURRENT_TEST,
# which pytest sets only while a test runs. A pytest started from a test (the
# carry drill's) inherits the outer one's: its collection would look like a
# test and skip whole modules. pytest sets it again for each of our tests.
os.environ.pop("PYTEST_CURRENT_TEST", None)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test given a release no pinned one is (support.releases.Missing, a
    helper's answer at collection): skipped in a rewound copy, failed here."""
    releases.setup(item)


@pytest.fixture
def release_dir(tmp_path: Path) -> Path:
    """A local folder standing in for a release's source."""
    return write_tree(tmp_path / "release", BASE)


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
    rel = lock.Release("9.9.0", "v9.9.0", "abc1234", "patched")
    old = lock.Release("9.8.0", "v9.8.0", "def5678", "patched")
    new = lock.Release("10.0.0", "v10.0.0", "0123456", "upstream")
    return lock.Lock({r.version: r for r in (rel, old, new)}, tmp_path / "VERSIONS.lock")


@pytest.fixture
def patched_tree(pins, release_dir, good_series, tmp_path) -> Path:
    """A vpatch tree of 9.9.0 with good_series applied."""
    dest = tmp_path / "tree"
    apply.apply("9.9.0", dest=dest, source=str(release_dir), series_dir=good_series, pins=pins)
    return dest


@pytest.fixture
def cache_root(tmp_path: Path, monkeypatch) -> Path:
    """An empty download cache of this test's own (VPATCH_CACHE)."""
    monkeypatch.setenv("VPATCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"
