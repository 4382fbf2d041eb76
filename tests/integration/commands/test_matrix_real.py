"""The matrix on the real releases (sources from the cache): the whole lock,
and the CLI's JSON for a few releases."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from packaging.version import Version
from vpatch import lock, series
from vpatch.commands import matrix

pytestmark = pytest.mark.integration

PINS = lock.load()
NEWEST = PINS.default()
UPSTREAM_FROM = Version("0.18.0")


@pytest.fixture(scope="module")
def real() -> matrix.Matrix:
    return matrix.build()


def test_matrix_covers_the_lock_and_the_newest_series(real):
    assert list(real.releases) == PINS.versions()
    names = [p.stem for p in series.load(PINS.series_dir(NEWEST)).patches]
    assert real.patches == names and len(names) == 4
    assert all(list(row) == names for row in real.releases.values())


def test_old_releases_need_every_patch_new_ones_have_them(real):
    for v, row in real.releases.items():
        if Version(v) < UPSTREAM_FROM:
            assert "upstream" not in row.values(), (v, row)
        else:
            assert set(row.values()) == {"upstream"}, (v, row)
    assert set(real.releases[NEWEST.version].values()) == {"clean"}


def test_cli_json_for_a_few_releases():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "vpatch.cli",
            "matrix",
            "--format",
            "json",
            "--versions",
            "0.17.1",
            "v0.18.0",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert list(data) == ["releases"] and list(data["releases"]) == ["0.17.1", "0.18.0"]
    assert data["releases"]["0.18.0"] == dict.fromkeys(data["releases"]["0.17.1"], "upstream")
