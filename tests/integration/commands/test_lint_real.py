"""lint on the repository itself, every release's source downloaded."""

from __future__ import annotations

import pytest
from vpatch import lock
from vpatch.maintain import lint

pytestmark = pytest.mark.integration


def test_lint_passes_on_the_repository():
    result = lint.lint(lock.load())
    assert [str(p) for p in result.problems] == [] and result.skipped == []
