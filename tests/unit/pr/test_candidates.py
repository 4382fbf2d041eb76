"""pr/candidates.py: which patches a pull request sends, and their titles."""

from __future__ import annotations

from pathlib import Path

from support import pr as world
from support.pr import FIX
from vpatch import lock, quilt
from vpatch.pr.candidates import candidates, derive_prefix

root = world.root  # the fixture (support.pr)


def test_candidates_newest_series_then_the_upstream_one(root):
    cands = candidates(lock.load(root / "VERSIONS.lock"), root / "patches/patches.toml")
    assert [(c.patch.name, c.release) for c in cands] == [
        ("0001-model-change-five.patch", "9.8.0"),
        ("0002-config-allow-deepseek.patch", "9.8.0"),
        (FIX, "10.0.0"),
    ]
    # declared in patches.toml, or derived: a fix is a [Bugfix]; files name the area
    assert cands[2].title == "[Bugfix][Model] Model: fix thirty at layer 0"
    assert cands[0].title == "[Misc] model: change five"


def test_derived_prefixes():
    p = quilt.Patch("x", Path("x"), "", "", "deepseek_v2: fix the hooks", "", {}, [], None)
    p.files = ["vllm/model_executor/models/deepseek_v2.py", "vllm/v1/spec_decode/eagle.py"]
    assert derive_prefix(p) == "[Bugfix][Model][Spec Decode]"


def test_a_model_package_is_a_model_too():
    """vLLM's per-model packages (vllm/models/) are [Model] as
    model_executor/models/ is."""
    p = quilt.Patch("x", Path("x"), "", "", "deepseek_v32: fix the capture", "", {}, [], None)
    p.files = ["vllm/models/deepseek_v32/nvidia/model.py", "tests/models/test_x.py"]
    assert derive_prefix(p) == "[Bugfix][Model]"
