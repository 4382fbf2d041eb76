"""The patched-vLLM tier (outer side).  It runs under the project's python;
the inner suite in release/ runs in a tier venv (see vllm_tier) and must never
be collected here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HOLDS_SLOT = pytest.StashKey[bool]()

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
    build the tier's venvs and installs meanwhile and start each release's
    inner runs as soon as they are built (vllm_tier.prepare, .session), on
    the core those tests leave: until the first tier test, this process holds
    one of the runs' slots (vllm_tier.runner.slot)."""
    items = session.items
    first = next((i for i, it in enumerate(items) if it.get_closest_marker("vllm")), None)
    if not first or session.config.option.collectonly:  # None, or the tier runs first
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from vllm_tier import prepare, runner
    from vllm_tier import session as tier

    wanted = prepare.wanted_by(items)
    if not wanted:
        return
    # the session's basetemp (what the tmp_path_factory fixture hands out; no
    # fixture can be asked for before the first test)
    out = session.config._tmp_path_factory.mktemp("vllm")
    runs = tier.begin(out, fixtures_from=next(iter(wanted)))
    runner.take_slot()
    session.config.stash[_HOLDS_SLOT] = True
    prepare.ahead(wanted, then=runs.start)


def _give_back(config) -> None:
    if config.stash.get(_HOLDS_SLOT, False):
        config.stash[_HOLDS_SLOT] = False
        sys.modules["vllm_tier.runner"].give_slot()


def pytest_runtest_setup(item):
    # the first tier test: this process now only waits for runs
    _give_back(item.config)


def pytest_sessionfinish(session):
    _give_back(session.config)
    tier = sys.modules.get("vllm_tier.session")
    if tier is not None and tier.current() is not None:
        tier.current().stop()


def pytest_terminal_summary(terminalreporter):
    # test_releases.py appends one block per release (and the env build time).
    summaries = getattr(terminalreporter.config, "_vpatch_vllm_summaries", [])
    if not summaries:
        return
    terminalreporter.section("patched-vLLM tier")
    for block in summaries:
        for line in block.splitlines():
            terminalreporter.write_line(line)
