"""The pytest hooks each of the tier's plugins has, written once: install
the plugin when pytest configures (before the session's model is built), and
say in the report header what it installed. A plugin takes them as::

    pytest_configure, pytest_report_header = hooks.pytest_hooks("CPU MoE", install, installed)

A plugin that runs kernels by Triton's interpreter counts their launches and
wall time in one ``Launches``, whose terminal summary says what the
interpreter cost the process (the choice of the interpreter over torch ports
was made on that figure).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


class Launches:
    """The interpreted kernel launches of one plugin in this process: how
    often each kernel ran, and for how long."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.counts: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """One launch of kernel ``name``, counted and timed (a launch that
        raises too: its time was spent)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.counts[name] += 1
            self.seconds[name] += time.perf_counter() - start

    def total_seconds(self) -> float:
        return sum(self.seconds.values())

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.counts:
            terminalreporter.write_line(
                f"{self.label}: {sum(self.counts.values())} interpreted kernel launches, "
                f"{self.total_seconds():.2f}s ({dict(self.counts)})"
            )
