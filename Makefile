# Tribunal: `make up` runs the stack locally, `make test` runs the whole suite.
# Both install the system tools they need (scripts/setup-tools.sh: apt-get as root, sudo -n
# otherwise, else it stops with the command to run), create .venv and install into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Every install reads a lock (requirements/*.txt, `make lock`): exact versions with hashes, and
# nothing resolved at install time. The project itself is installed without its dependencies
# and without build isolation, so that its build backend is the locked setuptools too.
PIP := $(BIN)/pip install --quiet --disable-pip-version-check
LOCK_BASE := requirements/base.txt
LOCK_ALL := requirements/all.txt

.PHONY: up test lint lock check-lock docs openapi bench-math clean tools

tools:
	@PYTHON=$(PYTHON) scripts/setup-tools.sh

$(BIN)/python: | tools
	$(PYTHON) -m venv $(VENV)

# The services need no torch: `make up` installs the base lock only.
$(VENV)/.base: pyproject.toml $(LOCK_BASE) | $(BIN)/python
	$(PIP) --require-hashes --no-deps -r $(LOCK_BASE)
	$(PIP) --no-deps --no-build-isolation -e .
	touch $@

# Every extra the suite exercises (torch is the CPU build, pinned in the lock), then the
# trainers installed without their dependencies (requirements/trainers-nodeps.txt, by hand),
# and verl's Hydra beside the venv (requirements/verl-hydra.txt: ANTLR 4.9, which the math
# verifier's math-verify cannot share).
LOCK_NODEPS := requirements/trainers-nodeps.txt
LOCK_VERL_HYDRA := requirements/verl-hydra.txt
$(VENV)/.all: pyproject.toml $(LOCK_ALL) $(LOCK_NODEPS) $(LOCK_VERL_HYDRA) | $(BIN)/python
	$(PIP) --require-hashes --no-deps -r $(LOCK_ALL)
	$(PIP) --require-hashes --no-deps -r $(LOCK_NODEPS)
	rm -rf $(VENV)/verl-hydra
	$(PIP) --require-hashes --no-deps --target $(VENV)/verl-hydra -r $(LOCK_VERL_HYDRA)
	$(PIP) --no-deps --no-build-isolation -e .
	touch $@ $(VENV)/.base

up: tools $(VENV)/.base
	$(BIN)/tribunal up

test: tools $(VENV)/.all
	$(MAKE) check-lock lint
	$(BIN)/python -m pytest

# pyproject.toml, the locks and the venv agree (scripts/check_lock.py says what does not).
check-lock: $(VENV)/.all
	$(BIN)/python scripts/check_lock.py --venv all

lock:
	@PYTHON=$(PYTHON) scripts/lock.sh

lint: $(VENV)/.all
	$(BIN)/ruff check services trainer bench tests scripts
	$(BIN)/ruff format --check services trainer bench tests scripts
	scripts/typecheck.sh

# compose.yaml's stack in real containers (podman, podman-compose): scripts/compose-test.sh.
.PHONY: compose-test
compose-test: $(VENV)/.all
	scripts/compose-test.sh

# The documentation site (mkdocs.yml; strict: a broken link or API reference fails it; not
# --quiet, which hides the warnings that strict counts).
docs: $(VENV)/.all
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

openapi: $(VENV)/.base
	$(BIN)/tribunal openapi

bench-math: $(VENV)/.base
	$(BIN)/python bench/math_throughput.py

clean:
	rm -rf $(VENV) .lock-venv .mypy_cache .ruff_cache site
