"""The patched-vLLM tier (outer side).  It runs under the project's python;
the inner suite in release/ runs in a tier venv (see vllm_tier) and must never
be collected here."""

from __future__ import annotations

import sys
from pathlib import Path

collect_ignore = [
    "release",
    "series",
    "vllm_tier",
    "bench_forward.py",
    "env.py",
    "fixtures.py",
    "mutants.py",
]


def pytest_collection_finish(session):
    """When other tests run before the tier (`make test`: unit, integration),
    build the tier's venvs and installs and run its inner runs meanwhile, in a
    process of its own (vllm_tier.background)."""
    items = session.items
    first = next((i for i, it in enumerate(items) if it.get_closest_marker("vllm")), None)
    if not first or session.config.option.collectonly:  # None, or the tier runs first
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from vllm_tier import background, prepare

    # the session's basetemp (what the tmp_path_factory fixture hands out; no
    # fixture can be asked for before the first test)
    out = session.config._tmp_path_factory.mktemp("vllm")
    background.start(prepare.wanted_by(items), out)


def pytest_sessionfinish(session):
    background = sys.modules.get("vllm_tier.background")
    if background is not None and background.current() is not None:
        background.current().stop()


def pytest_terminal_summary(terminalreporter):
    # test_releases.py appends one block per release (and the env build time).
    summaries = getattr(terminalreporter.config, "_vpatch_vllm_summaries", [])
    if not summaries:
        return
    terminalreporter.section("patched-vLLM tier")
    for block in summaries:
        for line in block.splitlines():
            terminalreporter.write_line(line)
