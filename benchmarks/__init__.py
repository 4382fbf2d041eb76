"""Speed goals as scripts, each a ratio of two ways measured in one run
(docs/measurements.md records what they measured). Each is a module of
this package, run from the checkout's root with the project's python, where
vpatch is installed (`make .venv/bin/.installed`): `python -m
benchmarks.bench_wheel`. Those that build their inputs with the tests'
helpers (tests/support: a rewound copy, a fake environment, the stand-in
hub) take tests/ on PYTHONPATH, as the tests' own subprocesses do. The
Makefile's bench-* targets run each so; nothing here edits sys.path
(tests/unit/test_layers.py)."""
