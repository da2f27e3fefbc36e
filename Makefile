# Two commands for a new user: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck pytest explore bench clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/evertalk $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy src

pytest: $(STAMP)
	$(BIN)/python -m pytest || test $$? -eq 5  # 5: no tests collected yet

test: lint typecheck pytest

# The property tests with fresh random examples, twenty times as many (not part of `make test`,
# which runs them derandomized so that it never fails by chance).
explore: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(BIN)/python -m pytest -m hypothesis -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build dist .mypy_cache .pytest_cache .ruff_cache
