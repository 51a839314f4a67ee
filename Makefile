# Set-up and checks for a checkout. Everything installs into .venv/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: quickstart test bench man clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

quickstart: $(BIN)/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/quickstart.sh

test: $(BIN)/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

bench: $(BIN)/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m tests.bench

man: $(BIN)/.installed
	$(BIN)/python -m hills.manpages

clean:
	rm -rf $(VENV) build *.egg-info
