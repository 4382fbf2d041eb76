"""The matrix on the real releases (sources from the cache): the whole lock,
and the CLI's JSON for a few releases."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from packaging.version import Version
from support import series_of
from vpatch import lock, quilt
from vpatch.commands import matrix

pytestmark = pytest.mark.integration

PINS = lock.load()
NEWEST = PINS.default()
UPSTREAM_FROM = Version("0.18.0")


@pytest.fixture(scope="module")
def real() -> matrix.Matrix:
    return matrix.build(pins=lock.load())


LAYER0 = "0001-deepseek-v2-fix-eagle-3-aux-hidden-state-at-layer-0"
# the EAGLE-3 patches of 0.15.0-0.17.1 (upstream from 0.18.0): the newest
# series' patches but the fixes it shares with 0.18.0's series
LATER = {p.slug for p in series_of(PINS, PINS.get("0.18.0")).patches}
EAGLE3 = [p.stem for p in series_of(PINS, NEWEST).patches if p.slug not in LATER]


def test_matrix_covers_the_lock_and_every_patch_of_every_series(real):
    assert list(real.releases) == PINS.versions()
    keys = {p.slug for v in PINS.with_series() for p in series_of(PINS, v).patches}
    assert {quilt.slug(n) for n in real.patches} == keys
    assert len(real.patches) == len(PINS.patchset.slugs)
    assert real.patches[:4] == EAGLE3 and LAYER0 in real.patches
    assert real.source[LAYER0] == "0.33.0" and real.source[EAGLE3[0]] == NEWEST.version
    assert all(list(row) == real.patches for row in real.releases.values())
    assert set(real.series.values()) == {"applies"}  # every release's own series applies


def test_old_releases_need_every_patch_new_ones_the_layer_0_fix(real):
    for v, row in real.releases.items():
        eagle3 = {row[n] for n in EAGLE3}
        if Version(v) < UPSTREAM_FROM:
            assert "upstream" not in eagle3, (v, row)
        else:
            assert eagle3 == {"upstream"}, (v, row)
            assert row[LAYER0] != "upstream", (v, row)  # upstream still lacks it
    # a variant serves a span of releases: on the later ones its hunks sit at
    # other lines (offset), never with less context (fuzz)
    assert {real.releases[NEWEST.version][n] for n in EAGLE3} <= {"clean", "offset"}
    assert real.releases["0.33.0"][LAYER0] in ("clean", "offset")  # 0.27.0's variant


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
    assert list(data) == ["releases", "series"]
    assert list(data["releases"]) == ["0.17.1", "0.18.0"]
    for name in EAGLE3:
        assert data["releases"]["0.18.0"][name] == "upstream"
    assert data["releases"]["0.18.0"][LAYER0] != "upstream"
    assert data["series"] == {"0.17.1": "applies", "0.18.0": "applies"}
