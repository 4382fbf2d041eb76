"""vpatch built the standard way: `python -m build` makes the sdist, then
the wheel from that sdist; the wheel installed into a fresh venv (its
dependencies from the package index pip is configured with) gives a
`vpatch` that works from any directory with the lock and the patch set it
carries, and refuses to edit them in site-packages."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from support.cli import vpatch
from support.env import build_env, make_fake_series, snapshot
from vpatch import lock, quilt

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "vpatch" / "data"
pytestmark = pytest.mark.integration


def data_files() -> dict[str, bytes]:
    """The package data as a wheel carries it: {path in the wheel: bytes}."""
    return {
        f"vpatch/data/{p.relative_to(DATA).as_posix()}": p.read_bytes()
        for p in sorted(DATA.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """(sdist, wheel): `python -m build` of the checkout (the wheel is built
    from the sdist, as build does by default)."""
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (sdist,) = out.glob("vpatch-*.tar.gz")
    (wheel,) = out.glob("vpatch-*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def venv(built, tmp_path_factory) -> Path:
    """A fresh venv with the built wheel pip-installed (dependencies included);
    its bin/ folder."""
    where = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    r = subprocess.run(
        [str(where / "bin" / "python"), "-m", "pip", "install", "-q", str(built[1])],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return where / "bin"


def installed(bin_: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The venv's installed `vpatch` script, away from this checkout."""
    away = {"VPATCH_ROOT": None, "PYTHONPATH": None}
    return vpatch(*args, program=[str(bin_ / "vpatch")], env=away, cwd=cwd)


def test_the_sdist_and_its_wheel_carry_the_data(built):
    sdist, wheel = built
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]
        held = {n.removeprefix(f"{top}/src/") for n in tar.getnames()}
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert {n: zf.read(n) for n in names if n.startswith("vpatch/data/")} == data_files()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert set(data_files()) <= held
    assert "vpatch/py.typed" in names and "vpatch/cli/__init__.py" in names
    requires = [ln for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]
    assert not any(r.split()[1].lower() == "wheel" for r in requires)  # nothing imports it


def test_the_installed_vpatch_works_from_another_folder(venv, tmp_path):
    r = installed(venv, tmp_path, "lock")
    assert r.returncode == 0, r.stderr
    (default,) = [ln.split()[0] for ln in r.stdout.splitlines() if ln.endswith("(default)")]
    assert default == lock.load().default().version, r.stdout
    fixes = lock.load().versions("upstream-fix")[0]  # a series of fixes, layer 0's first
    r = installed(venv, tmp_path, "series", fixes, "--out", "s")
    assert r.returncode == 0, r.stderr
    # the installed package renders what the source tree's patch set does
    want = lock.load().series(fixes).files_out()
    assert want["series"].startswith(b"0001-deepseek-v2-fix-eagle-3-aux-hidden-state-at-layer-0")
    got = {p.name: p.read_bytes() for p in (tmp_path / "s").iterdir()}
    assert quilt.MANIFEST in got  # what vpatch wrote there, so a rewrite may replace it
    assert {n: data for n, data in got.items() if n != quilt.MANIFEST} == want
    # install --dry-run into a fake vLLM: nothing in it changes
    py = build_env(tmp_path / "fake")
    before = snapshot(py)
    series = make_fake_series(tmp_path / "series-work")
    r = installed(
        venv, tmp_path, "install", "--python", str(py), "--series", str(series), "--dry-run"
    )
    assert r.returncode == 0, r.stderr
    assert "would install series series (2 patches" in r.stdout
    assert snapshot(py) == before
    r = installed(venv, tmp_path, "status", str(tmp_path))
    assert r.returncode == 6 and "not a vpatch tree" in r.stderr


def test_editing_the_patch_set_needs_a_checkout(venv, tmp_path):
    site = next((venv.parent / "lib").glob("python3*/site-packages"))
    data = site / "vpatch" / "data"
    before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    r = installed(venv, tmp_path, "port", *lock.load().versions()[:-3:-1], "--offline")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "vpatch: error: vpatch port edits the patch set: run it in a vpatch checkout "
        "(or set VPATCH_ROOT)"
    ]
    assert {p: p.read_bytes() for p in data.rglob("*") if p.is_file()} == before
