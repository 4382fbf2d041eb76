"""The patched-vLLM tier (outer side). It runs under the project's python;
the inner suite in release/ runs in a tier venv (see vllm_tier) and must never
be collected here."""

collect_ignore = [
    "release",
    "series",
    "vllm_tier",
    "bench_forward.py",
    "fixtures.py",
    "mutants.py",
    "tier.py",
]
