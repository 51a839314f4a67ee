# Set-up and checks for a checkout. Everything installs into .venv/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: quickstart test bench man man-install clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

# pip's editable install leaves out the wheel's data files, the man pages
# among them: write them into .venv/share/man, where man finds them for
# .venv/bin on PATH. Pages that did not change are not rewritten.
man-install: $(BIN)/.installed
	$(BIN)/python -m hills.manpages --install $(VENV)

quickstart: $(BIN)/.installed man-install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/quickstart.sh

test: $(BIN)/.installed man-install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

bench: $(BIN)/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m tests.bench

man: $(BIN)/.installed
	$(BIN)/python -m hills.manpages
	$(BIN)/python -m hills.manpages --install $(VENV)

clean:
	rm -rf $(VENV) build *.egg-info
