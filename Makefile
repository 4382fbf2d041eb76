# vpatch: the EAGLE-3 patch set for the vLLM releases VERSIONS.lock pins.
#   make apply [VLLM=0.15.1]   patched source tree in build/vllm-<release>
#   make test                  the whole suite (unit, integration, vLLM tier)
#   make mutants               mutants of the series through the vLLM tier (not in `test`)
#   make docs                  the docs' generated tables, from patches.toml and the tier
# VLLM defaults to the newest release VERSIONS.lock marks `patched`.

VLLM ?=
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
VPATCH := $(BIN)/vpatch

# Every variable a recipe hands to the shell goes through `quote`: one shell
# word, single-quoted (a ' in it as '\''), so `make apply VLLM='0.17.1; echo
# INJECTED'` gives vpatch that string instead of running the rest.
# `arg`: the same, or nothing for an empty variable (an optional argument).
quote = '$(subst ','\'',$(1))'
arg = $(if $(1),$(call quote,$(1)))
PY := $(call quote,$(BIN)/python)
PYTEST := $(PY) -m pytest
TIER := $(PY) tests/vllm/tier.py
TIER_OUT ?= build/tier

.PHONY: apply fetch status wheel test test-unit test-integration test-vllm mutants lint \
	lint-ruff lint-format lint-types lint-patches lint-docs lint-workflows docs matrix drill crash \
	bench-forward bench-spec bench-wheel bench-matrix bench-install bench-doctor-hub \
	bench-carry clean

$(BIN)/.installed: pyproject.toml
	$(call quote,$(PYTHON)) -m venv $(call quote,$(VENV))
	$(call quote,$(BIN)/pip) install -q --upgrade pip
	$(call quote,$(BIN)/pip) install -q -e '.[test]'
	touch $(call quote,$@)

apply: $(BIN)/.installed
	$(call quote,$(VPATCH)) apply $(call arg,$(VLLM))

fetch: $(BIN)/.installed
	$(call quote,$(VPATCH)) fetch $(call arg,$(VLLM))

wheel: $(BIN)/.installed
	$(call quote,$(VPATCH)) wheel $(call arg,$(VLLM)) --variant cuda --out dist
	$(call quote,$(VPATCH)) verify-wheel "$$(ls -t dist/vllm-*.whl | head -1)" --arch sm_100

# The tier program (tests/vllm/tier.py) builds and runs real vLLM on CPU beside
# the pytest run it is given, writing $(TIER_OUT)/results.json; then the tier's
# outer tests judge that file. Either failing fails the target; interrupted
# (status 128+), the program has ended what it started and nothing runs after.
define tier
	VLLM=$(call quote,$(VLLM)) $(TIER) run --out $(call quote,$(TIER_OUT)) -- $(PYTEST) $(1); \
	s=$$?; [ $$s -lt 128 ] || exit $$s; \
	VLLM=$(call quote,$(VLLM)) VPATCH_TIER_RESULTS=$(call quote,$(TIER_OUT)/results.json) \
	  $(PYTEST) tests/vllm/test_releases.py || s=1; exit $$s
endef

test: $(BIN)/.installed
	$(call tier,tests/unit tests/integration tests/vllm/test_install.py)

test-unit: $(BIN)/.installed
	$(PYTEST) tests/unit

test-integration: $(BIN)/.installed
	$(PYTEST) tests/integration

# crash consistency, longer than CI's 20 kills per command
CRASH_RUNS ?= 200
crash: $(BIN)/.installed
	CRASH_RUNS=$(call quote,$(CRASH_RUNS)) $(PYTEST) tests/unit/test_crash.py -s

test-vllm: $(BIN)/.installed
	$(call tier,tests/vllm/test_install.py)

# every mutant of tests/vllm/mutants.py must be killed by the inner suite
mutants: $(BIN)/.installed
	$(PY) tests/vllm/mutants.py

# a target a check: .pre-commit-config.yaml runs the same ones
lint: lint-ruff lint-format lint-types lint-patches lint-docs lint-workflows

lint-ruff: $(BIN)/.installed
	$(call quote,$(BIN)/ruff) check src tests benchmarks

lint-format: $(BIN)/.installed
	$(call quote,$(BIN)/ruff) format --check src tests benchmarks

lint-types: $(BIN)/.installed
	$(call quote,$(BIN)/mypy)

# the patch set: files, DEP-3, every release's series up to date (~40 s warm)
lint-patches: $(BIN)/.installed
	$(call quote,$(VPATCH)) lint

lint-docs: $(BIN)/.installed
	$(call quote,$(VPATCH)) docs --check
	$(TIER) docs --check

# the GitHub workflows: actionlint (with the pinned shellcheck on their run:
# scripts; no pyflakes, none is in Python) and zizmor's security audits,
# offline; every tool from the venv, so a machine's own shellcheck changes nothing
lint-workflows: $(BIN)/.installed
	$(call quote,$(BIN)/actionlint) -shellcheck=$(call quote,$(BIN)/shellcheck) -pyflakes=
	$(call quote,$(BIN)/zizmor) --offline .github/workflows

# the README's patch table, docs/patches.md and docs/doctor.md's tables,
# written anew from patches.toml (and doctor's RULES); the tier's tables
# (docs/tier.md, docs/cpu-bugs.md, tests/vllm/README.md) from its checks and
# stand-ins
docs: $(BIN)/.installed
	$(call quote,$(VPATCH)) docs
	$(TIER) docs

matrix: $(BIN)/.installed
	$(call quote,$(VPATCH)) matrix

# the carry drill against the real package index (make test runs it against a
# stand-in index); VPATCH_CACHE=<empty folder> for a cold one
drill: $(BIN)/.installed
	VPATCH_DRILL=real $(PYTEST) tests/integration/commands/test_carry_drill.py

bench-forward: $(BIN)/.installed
	$(PY) tests/vllm/bench_forward.py $(call arg,$(VLLM))

# EAGLE-3 acceptance and tokens/s with a trained drafter, eager and compiled
# (0.26.0 and 0.32.0 unless VLLM=...; trains the drafter once, a few minutes)
bench-spec: $(BIN)/.installed
	$(PY) tests/vllm/bench_spec.py $(call arg,$(VLLM))

# benchmarks/: modules of their package, over the installed vpatch; those
# that build their inputs with the tests' helpers take tests/ on PYTHONPATH
bench-wheel: $(BIN)/.installed
	$(PY) -m benchmarks.bench_wheel $(call arg,$(VLLM))

bench-matrix: $(BIN)/.installed
	$(PY) -m benchmarks.bench_matrix

bench-install: $(BIN)/.installed
	$(PY) -m benchmarks.bench_install $(call arg,$(VLLM))

bench-doctor-hub: $(BIN)/.installed
	PYTHONPATH=tests $(PY) -m benchmarks.bench_doctor_hub

bench-carry: $(BIN)/.installed
	PYTHONPATH=tests $(PY) -m benchmarks.bench_carry

clean:
	rm -rf build dist pr $(call quote,$(VENV)) .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
