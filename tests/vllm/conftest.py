"""The patched-vLLM tier (outer side).  It runs under the project's python;
the inner suite in release/ runs in a tier venv (see vllm_tier) and must never
be collected here."""

from __future__ import annotations

collect_ignore = [
    "release",
    "series",
    "vllm_tier",
    "bench_forward.py",
    "env.py",
    "fixtures.py",
    "mutants.py",
]


def pytest_terminal_summary(terminalreporter):
    # test_releases.py appends one block per release (and the env build time).
    summaries = getattr(terminalreporter.config, "_vpatch_vllm_summaries", [])
    if not summaries:
        return
    terminalreporter.section("patched-vLLM tier")
    for block in summaries:
        for line in block.splitlines():
            terminalreporter.write_line(line)
