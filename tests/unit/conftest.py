"""Fixtures of the wheel tests (tests/unit/wheel, tests/unit/commands): a
small vllm-like wheel and a three-patch series for it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import BASE, change, make_series, make_wheel
from vpatch import quilt

# No unit test reaches the real Hugging Face hub: hub ids go to the stand-in
# hub (support/hub.py) or, by mistake, to this closed port, which fails at
# once. Set before huggingface_hub reads it (at import), for the subprocesses too.
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"


@pytest.fixture
def wheel_series(tmp_path: Path) -> quilt.Series:
    """Changes model.py twice, and config.py, adds eagle3.py, edits README.md
    (which no wheel ships)."""
    model = BASE["vllm/model.py"]
    d = make_series(
        tmp_path,
        BASE,
        [
            ("model: first change", {"vllm/model.py": change(model, "line 5\n", "line five\n")}),
            (
                "config: allow deepseek; add eagle3",
                {
                    "vllm/config.py": "allow = ['llama', 'deepseek']\n",
                    "vllm/eagle3.py": "AUX = (2, 20, 37)\n",
                    "README.md": "tiny, patched\n",
                },
            ),
            ("model: second change", {"vllm/model.py": change(model, "line 5\n", "line 5ive\n")}),
        ],
    )
    return quilt.load(d)


@pytest.fixture
def whl(tmp_path: Path) -> Path:
    """The vllm wheel support.make_wheel makes by default."""
    return make_wheel(tmp_path / "in")
