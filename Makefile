# Tribunal: `make up` runs the stack locally, `make test` runs the whole suite.
# Both install the system tools they need (scripts/setup-tools.sh: apt-get as root, sudo -n
# otherwise, else it stops with the command to run), create .venv and install into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: up test lint openapi bench-math clean tools

tools:
	@PYTHON=$(PYTHON) scripts/setup-tools.sh

$(BIN)/python: | tools
	$(PYTHON) -m venv $(VENV)

# The services need no torch: `make up` installs the base package only.
$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	touch $@

# Every extra the suite exercises (torch is pinned to the local CPU build in pyproject).
$(VENV)/.all: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,judge-local,trainer,trl]'
	touch $@ $(VENV)/.base

up: tools $(VENV)/.base
	$(BIN)/tribunal up

test: tools $(VENV)/.all
	$(MAKE) lint
	$(BIN)/python -m pytest

lint: $(VENV)/.all
	$(BIN)/ruff check services trainer bench tests
	$(BIN)/ruff format --check services trainer bench tests
	scripts/typecheck.sh

# compose.yaml's stack in real containers (podman, podman-compose): scripts/compose-test.sh.
.PHONY: compose-test
$(VENV)/.compose: pyproject.toml $(VENV)/.all
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,compose]'
	touch $@

compose-test: $(VENV)/.compose
	scripts/compose-test.sh

openapi: $(VENV)/.base
	$(BIN)/tribunal openapi

bench-math: $(VENV)/.base
	$(BIN)/python bench/math_throughput.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
