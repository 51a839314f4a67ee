# Set-up and checks for a checkout. Everything installs into .venv/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: quickstart test test-fast bench man man-install bytecode clean

# The suite runs in TEST_WORKERS processes (pytest-xdist), one more than
# the machine's cores: a fifth of the suite's time waits (on a socket's
# deadline, a server's exit, the package index), and the extra process
# works meanwhile. --dist loadfile keeps each test module in one of them
# (tests/conftest.py's scheduler says which modules share one).
# TEST_WORKERS=0 runs it in this process alone.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
PYTEST := PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The editable install is setuptools' compat mode: the checkout on a plain
# path entry, so an interpreter starts as fast as with a wheel (the default
# mode loads an import hook at every start, about 16 ms, paid by every
# command the tests and benchmarks run), and hills.disk.hill.shipped() finds
# examples/, hooks/ and skills/ beside the package. setuptools calls the
# mode transitional: where it is gone, the default mode is used.
# Its 14-line notice saying so is filtered out by the module that warns
# (setuptools.command.editable_wheel) alone: every other warning shows.
# .installed-hills is hills and its dependencies, all the quickstart needs;
# .installed adds the test extra (pytest, mypy, ruff, optuna, ray,
# matplotlib, docutils), which only the tests need.
EDITABLE := PYTHONWARNINGS="ignore:::setuptools.command.editable_wheel" $(BIN)/python -m pip install -q -e
# The package's bytecode (see the bytecode target below).
BYTECODE := $(BIN)/python -m compileall -q hills

$(BIN)/.installed-hills: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(EDITABLE) . --config-settings editable_mode=compat || $(EDITABLE) .
	$(BYTECODE)
	touch $@

$(BIN)/.installed: $(BIN)/.installed-hills
	$(EDITABLE) '.[test]' --config-settings editable_mode=compat || $(EDITABLE) '.[test]'
	$(BYTECODE)
	touch $@

# The package's bytecode, written at install: an editable checkout gets
# none from pip, and where PYTHONDONTWRITEBYTECODE=1 (some machines and CI
# images) no command ever writes it, so every cold eval compiled hills
# anew (about twice as slow). compileall writes whatever that variable
# says. A wheel install needs none of this: pip compiles what it installs.
bytecode:
	$(BYTECODE)

# pip's editable install leaves out the wheel's data files, the man pages
# among them: write them into .venv/share/man, where man finds them for
# .venv/bin on PATH. Pages that did not change are not rewritten.
# Copying the rendered pages needs no docutils: hills alone will do.
man-install: $(BIN)/.installed-hills
	$(BIN)/python -m hills.manpages --install $(VENV)

quickstart: $(BIN)/.installed-hills man-install bytecode
	PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/quickstart.sh

# Every test: what CI runs (.ci/run).
test: $(BIN)/.installed man-install bytecode
	$(PYTEST)

# The edit loop: every test not marked slow.
test-fast: $(BIN)/.installed man-install bytecode
	$(PYTEST) -m "not slow"

bench: $(BIN)/.installed bytecode
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m tests.bench

man: $(BIN)/.installed
	$(BIN)/python -m hills.manpages
	$(BIN)/python -m hills.manpages --install $(VENV)

clean:
	rm -rf $(VENV) build *.egg-info
