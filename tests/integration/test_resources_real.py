"""vpatch installed as a package (`pip install .`, not editable) finds its
VERSIONS.lock and patches/ as package data, from any working directory; the
commands that edit the patch set refuse to write into site-packages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target, ROOT],
        check=True,
        capture_output=True,
    )
    return target


def vpatch(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "VPATCH_ROOT"}
    env["PYTHONPATH"] = str(installed)  # the dependencies come from this interpreter
    return subprocess.run(
        [sys.executable, "-m", "vpatch", *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_data_travels_with_the_package(installed, tmp_path):
    data = installed / "vpatch" / "_data"
    assert (data / "VERSIONS.lock").read_bytes() == (ROOT / "VERSIONS.lock").read_bytes()
    for series in ROOT.glob("patches/*/series"):
        copy = data / series.relative_to(ROOT)
        assert copy.read_bytes() == series.read_bytes()
    out = vpatch(installed, tmp_path, "lock")
    assert out.returncode == 0, out.stderr
    assert "0.17.1" in out.stdout and "(default)" in out.stdout
    where = vpatch(installed, tmp_path, "status", str(tmp_path))
    assert where.returncode == 6 and "not a vpatch tree" in where.stderr


def test_editing_the_patch_set_needs_a_checkout(installed, tmp_path):
    data = installed / "vpatch" / "_data"
    before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    out = vpatch(installed, tmp_path, "port", "0.32.0", "0.31.0", "--offline")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "vpatch: error: vpatch port edits the patch set: run it in a vpatch checkout "
        "(or set VPATCH_ROOT)"
    ]
    assert {p: p.read_bytes() for p in data.rglob("*") if p.is_file()} == before
