# Two commands for a fresh machine: `make run` and `make test`. Both create .venv and install
# the project (with its test dependencies) first; the stamp file re-runs the install only when
# pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run test typecheck bench codegen clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(PY) -m server

typecheck: setup
	$(PY) -m mypy protocol captures server tools

test: setup typecheck
	$(PY) -m tools.codegen --check
	$(PY) -m pytest

bench: setup
	$(PY) -m tools.bench all --doc BENCHMARKS.md

codegen: setup
	$(PY) -m tools.codegen

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
