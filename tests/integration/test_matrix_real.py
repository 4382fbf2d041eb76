"""The release-tracking tools on the real releases (sources from the cache):
the matrix over the whole lock, the probes, a real port, a real lint."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from packaging.version import Version
from vpatch import lock, probes, series
from vpatch.commands import apply, lint, matrix, port
from vpatch.sources import files

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


def test_probes_missing_on_baseline_present_when_patched_and_upstream(tmp_path):
    checks = probes.load()
    todo = series.load(PINS.series_dir(NEWEST))
    globs = probes.patterns(checks)
    base = files.release_files(NEWEST, globs | set(todo.files))
    tree = tmp_path / "patched"
    apply.apply(NEWEST.version, dest=tree, source=str(base), series_dir=todo.dir)
    up = files.release_files(PINS.get("0.18.0"), globs)
    seen = {
        "baseline": probes.folder_files(base, globs),
        "patched": probes.folder_files(tree, globs),
        "0.18.0": probes.folder_files(up, globs),
    }
    for p in todo.patches:
        got = {k: probes.holds(checks[p.key], files) for k, files in seen.items()}
        assert got == {"baseline": False, "patched": True, "0.18.0": True}, p.name


def test_port_016_to_0171_reproduces_the_committed_series(tmp_path):
    before = PINS.path.read_bytes()
    r = port.port("0.16.0", "0.17.1", pins=PINS, work=tmp_path / "work", into=tmp_path / "out")
    assert r.conflict is None
    assert PINS.path.read_bytes() == before  # 0.17.1 is pinned with a series: lock untouched
    old = series.load(PINS.series_dir(PINS.get("0.16.0"))).patches
    committed = series.load(PINS.series_dir(NEWEST)).patches
    ported = series.load(tmp_path / "out").patches
    assert [p.name for p in ported] == [p.name for p in committed]
    for o, c, p in zip(old, committed, ported, strict=True):
        assert p.changes() == c.changes(), p.name
        assert p.message == o.message  # a port keeps FROM's message
        if o.message == c.message:
            assert p.path.read_bytes() == c.path.read_bytes(), p.name


def test_lint_passes_on_the_repository():
    result = lint.lint()
    assert [str(p) for p in result.problems] == [] and result.skipped == []
