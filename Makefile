# The two quick-start commands: `make demo` and `make test`. Both create (or reuse) .venv.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
DEMO_HOME ?= .soulpass-demo

.PHONY: demo test lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

demo: $(BIN)/.installed
	rm -rf $(DEMO_HOME)
	$(BIN)/soulpass --home $(DEMO_HOME) demo

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

test: $(BIN)/.installed lint
	$(BIN)/python -m pytest -q

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/commit_scaling.py

clean:
	rm -rf $(VENV) $(DEMO_HOME) .pytest_cache .mypy_cache .ruff_cache
