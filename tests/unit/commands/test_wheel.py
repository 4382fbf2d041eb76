"""`vpatch wheel` (commands/wheel.py): options, the overlay's dry-run plan,
and the source mode up to its preflight."""

from __future__ import annotations

import pytest
from vpatch import lock
from vpatch.commands import wheel as wheel_cmd
from vpatch.errors import ConfigError, PreflightError
from vpatch.wheel import build

PINS = lock.load()
# a release with an sdist and a series (the default: the newest patched) and
# one VERSIONS.lock pins wheels only for
WITH_SDIST = PINS.default().version
WHEEL_ONLY = next(v for v in PINS.versions() if "sdist" not in PINS.get(v).artifacts)
REQS = {"torch": ("requirements/build.txt", "torch==2.10.0")}


def test_build_rejects_bad_options():
    with pytest.raises(ConfigError, match="unknown variant"):
        wheel_cmd.build(WITH_SDIST, pins=PINS, variant="rocm")
    with pytest.raises(ConfigError, match="unknown mode"):
        wheel_cmd.build(WITH_SDIST, pins=PINS, mode="magic")


def test_source_mode_needs_an_sdist():
    with pytest.raises(ConfigError, match=rf"{WHEEL_ONLY} has no sdist .*--mode overlay"):
        wheel_cmd.build(WHEEL_ONLY, pins=PINS, mode="source", dry_run=True)


def test_source_mode_is_cuda_only():
    with pytest.raises(ConfigError, match="cuda variant only"):
        wheel_cmd.build(WITH_SDIST, pins=PINS, variant="cpu", mode="source", dry_run=True)


def test_overlay_dry_run_plan(tmp_path):
    plan = wheel_cmd.build(WITH_SDIST, pins=PINS, out=tmp_path, dry_run=True)
    assert isinstance(plan, build.BuildPlan)
    assert plan.output.name.startswith(f"vllm-{plan.local_version}-cp38-abi3-")
    assert plan.local_version.startswith(f"{WITH_SDIST}+eagle3.")
    assert "replaces" in plan.to_text()


def test_source_build_stops_at_preflight(monkeypatch, tmp_path):
    """A real (non-dry) source build on a machine without the pinned torch
    stops with one PreflightError line before touching anything."""
    monkeypatch.setattr(build, "preflight", lambda reqs, home: (["x: FAIL"], ["torch missing"]))
    monkeypatch.setattr(build, "_requirements_from_sdist", lambda *a: REQS)

    monkeypatch.setattr(build, "download", lambda a, offline=False: tmp_path / a.filename)
    with pytest.raises(PreflightError, match="^torch missing$"):
        wheel_cmd.build(
            WITH_SDIST, pins=PINS, mode="source", out=tmp_path / "dist", tree=tmp_path / "tree"
        )
    assert not (tmp_path / "tree").exists()
    plan = wheel_cmd.build(WITH_SDIST, pins=PINS, mode="source", out=tmp_path / "dist",
                           tree=tmp_path / "tree", dry_run=True)  # fmt: skip
    text = plan.to_text()
    assert "TORCH_CUDA_ARCH_LIST=10.0" in text and "setup.py bdist_wheel" in text
    assert (
        "--py-limited-api=cp38" in plan.cmd
        and "the build would stop (preflight):\n    - torch missing" in text
    )
    assert plan.shell().startswith(f"cd {tmp_path / 'tree'} && env VLLM_TARGET_DEVICE=cuda ")
