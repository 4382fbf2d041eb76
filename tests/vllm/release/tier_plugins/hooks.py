"""The pytest hooks each of the tier's plugins has, written once: install
the plugin when pytest configures (before the session's model is built), and
say in the report header what it installed. A plugin takes them as::

    pytest_configure, pytest_report_header = hooks.pytest_hooks("CPU MoE", install, installed)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def pytest_hooks(
    label: str, install: Callable[[], object], installed: Callable[[], list[str]]
) -> tuple[Callable[[Any], None], Callable[[Any], list[str] | None]]:
    """(pytest_configure, pytest_report_header) of the plugin named
    ``label`` whose ``install()`` patches vLLM and ``installed()`` says
    what it patched."""

    def pytest_configure(config: Any) -> None:
        install()

    def pytest_report_header(config: Any) -> list[str] | None:
        got = installed()
        return [f"{label}: {'; '.join(got)}"] if got else None

    return pytest_configure, pytest_report_header
