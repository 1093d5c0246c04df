# The two quick-start commands: `make demo` and `make test`. Both create (or reuse) .venv.
# POSIX only (Linux, macOS): the store relies on fsync, rename and flock semantics.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
DEMO_HOME ?= .soulpass-demo

.PHONY: demo test test-fast lint bench clean

# The demo needs only the core (no embedder, no server): a small install.
$(BIN)/.core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $@

# Tests, lint and benchmarks: every extra and the dev tools.
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(BIN)/.core $@

demo: $(BIN)/.core
	rm -rf $(DEMO_HOME)
	$(BIN)/soulpass --home $(DEMO_HOME) demo

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/mypy

test: $(BIN)/.installed lint
	$(BIN)/python -m pytest

# The suite without the long crash and concurrency soaks (`-m "not slow"`): a few minutes.
test-fast: $(BIN)/.installed
	$(BIN)/python -m pytest -m "not slow"

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/commit_scaling.py

clean:
	rm -rf $(VENV) $(DEMO_HOME) .pytest_cache .mypy_cache .ruff_cache
