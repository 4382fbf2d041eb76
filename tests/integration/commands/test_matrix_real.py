"""The matrix on the real releases (sources from the cache): the whole lock,
and the CLI's JSON for a few releases."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version
from support import series_of
from support.cli import vpatch
from vpatch import lock, quilt
from vpatch.commands import matrix

pytestmark = pytest.mark.integration

PINS = lock.load()
NEWEST = PINS.default()
# the first release with EAGLE-3 upstream: the one after the patched ones
UPSTREAM_FROM = PINS.versions()[len(PINS.versions("patched"))]
# the newest release whose series carries the layer-0 fix (patches.toml)
LAYER0_LAST = PINS.patchset.serving(PINS.patchset.fixes()["layer0"], PINS.versions())[-1]


@pytest.fixture(scope="module")
def real() -> matrix.Matrix:
    return matrix.build(pins=lock.load())


LAYER0 = "0001-deepseek-v2-fix-eagle-3-aux-hidden-state-at-layer-0"
# the EAGLE-3 patches of the patched releases (upstream from UPSTREAM_FROM):
# the newest patched series' patches but the fixes it shares with
# UPSTREAM_FROM's series
LATER = {p.slug for p in series_of(PINS, PINS.get(UPSTREAM_FROM)).patches}
EAGLE3 = [p.stem for p in series_of(PINS, NEWEST).patches if p.slug not in LATER]


def test_matrix_covers_the_lock_and_every_patch_of_every_series(real):
    assert list(real.releases) == PINS.versions()
    keys = {p.slug for v in PINS.with_series() for p in series_of(PINS, v).patches}
    assert {quilt.slug(n) for n in real.patches} == keys
    assert len(real.patches) == len(PINS.patchset.slugs)
    assert real.patches[:4] == EAGLE3 and LAYER0 in real.patches
    assert real.source[LAYER0] == LAYER0_LAST and real.source[EAGLE3[0]] == NEWEST.version
    assert all(list(row) == real.patches for row in real.releases.values())
    assert set(real.series.values()) == {"applies"}  # every release's own series applies


def test_old_releases_need_every_patch_new_ones_the_layer_0_fix(real):
    for v, row in real.releases.items():
        eagle3 = {row[n] for n in EAGLE3}
        if Version(v) < Version(UPSTREAM_FROM):
            assert "upstream" not in eagle3, (v, row)
        else:
            # upstream, or its code removed upstream (patches.toml `gone`)
            gone = PINS.patchset.gone(v)
            assert all(
                row[n] == ("gone" if quilt.slug(n) in gone else "upstream") for n in EAGLE3
            ), (v, row)
            assert row[LAYER0] != "upstream", (v, row)  # upstream still lacks it
    # a variant serves a span of releases: on the later ones its hunks sit at
    # other lines (offset), never with less context (fuzz)
    assert {real.releases[NEWEST.version][n] for n in EAGLE3} <= {"clean", "offset"}
    # its newest variant, on the last release it serves
    assert real.releases[LAYER0_LAST][LAYER0] in ("clean", "offset")


def test_cli_json_for_a_few_releases():
    # f"v...": as the tag spells it
    out = vpatch("matrix", "--format", "json", "--versions", NEWEST.version, f"v{UPSTREAM_FROM}")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert list(data) == ["releases", "series"]
    assert list(data["releases"]) == [NEWEST.version, UPSTREAM_FROM]
    for name in EAGLE3:
        assert data["releases"][UPSTREAM_FROM][name] == "upstream"
    assert data["releases"][UPSTREAM_FROM][LAYER0] != "upstream"
    assert data["series"] == {NEWEST.version: "applies", UPSTREAM_FROM: "applies"}
