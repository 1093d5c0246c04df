# The two quick-start commands: `make demo` and `make test`. Both create (or reuse) .venv.
# POSIX only (Linux, macOS): the store relies on fsync, rename and flock semantics.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
DEMO_HOME ?= .soulpass-demo

.PHONY: demo test test-fast lint bench clean browser

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

# Debian's Chromium for the memory browser's tests (tests/test_ui_browser.py, driven by Playwright);
# nothing when it is there. Elsewhere (not root, no apt, no network) the browser tests skip and say why.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  echo "installing Debian's chromium for the browser tests" && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "no Chromium here: tests/test_ui_browser.py will skip"

test: $(BIN)/.installed lint browser
	$(BIN)/python -m pytest

# The suite without the long crash and concurrency soaks (`-m "not slow"`): a few minutes.
test-fast: $(BIN)/.installed
	$(BIN)/python -m pytest -m "not slow"

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/commit_scaling.py

clean:
	rm -rf $(VENV) $(DEMO_HOME) .pytest_cache .mypy_cache .ruff_cache
