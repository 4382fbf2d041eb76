# vpatch: the EAGLE-3 patch set for vLLM 0.15.0-0.33.0.
#   make apply [VLLM=0.15.1]   patched source tree in build/vllm-<release>
#   make test                  the whole suite (unit, integration, vLLM tier)
#   make mutants               mutants of the series through the vLLM tier (not in `test`)
# VLLM defaults to the newest release VERSIONS.lock marks `patched`.

VLLM ?=
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
VPATCH := $(BIN)/vpatch
PYTEST := $(BIN)/python -m pytest

.PHONY: apply fetch status wheel test test-unit test-integration test-vllm mutants lint matrix crash \
	bench-forward bench-spec bench-wheel bench-matrix bench-install clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

apply: $(BIN)/.installed
	$(VPATCH) apply $(VLLM)

fetch: $(BIN)/.installed
	$(VPATCH) fetch $(VLLM)

wheel: $(BIN)/.installed
	$(VPATCH) wheel $(VLLM) --variant cuda --out dist
	$(VPATCH) verify-wheel $$(ls -t dist/vllm-*.whl | head -1) --arch sm_100

test: $(BIN)/.installed
	$(PYTEST) tests

test-unit: $(BIN)/.installed
	$(PYTEST) tests/unit

test-integration: $(BIN)/.installed
	$(PYTEST) tests/integration

# crash consistency, longer than CI's 20 kills per command
CRASH_RUNS ?= 200
crash: $(BIN)/.installed
	CRASH_RUNS=$(CRASH_RUNS) $(PYTEST) tests/unit/test_crash.py -s

test-vllm: $(BIN)/.installed
	VLLM=$(VLLM) $(PYTEST) tests/vllm

# every mutant of tests/vllm/mutants.py must be killed by the inner suite
mutants: $(BIN)/.installed
	$(BIN)/python tests/vllm/mutants.py

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(VPATCH) lint

matrix: $(BIN)/.installed
	$(VPATCH) matrix

bench-forward: $(BIN)/.installed
	$(BIN)/python tests/vllm/bench_forward.py $(VLLM)

# EAGLE-3 acceptance and tokens/s with a trained drafter, eager and compiled
# (0.26.0 and 0.32.0 unless VLLM=...; trains the drafter once, a few minutes)
bench-spec: $(BIN)/.installed
	$(BIN)/python tests/vllm/bench_spec.py $(VLLM)

bench-wheel: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_wheel.py $(VLLM)

bench-matrix: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_matrix.py

bench-install: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_install.py $(VLLM)

clean:
	rm -rf build dist pr $(VENV) .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
