# Tribunal: `make up` runs the stack locally, `make dev` builds the full development environment,
# `make test` builds it and runs the whole suite, `make data` fetches the public data sets.
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
# torch comes from PyTorch's index, not PyPI: requirements/torch.txt pins its version, TORCH_INDEX
# picks the build (the CPU one by default; a GPU machine: TORCH_INDEX=https://download.pytorch.org/whl/cu128).
LOCK_TORCH := requirements/torch.txt
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: up dev data train test test-extended test-fast lint lock check-lock docs openapi monitoring bench-math clean tools protocol-envs trainer-envs

tools:
	@PYTHON=$(PYTHON) scripts/setup-tools.sh

$(BIN)/python: | tools
	$(PYTHON) -m venv $(VENV)

# The services need no torch: `make up` installs the base lock only.
$(VENV)/.base: pyproject.toml client/pyproject.toml $(LOCK_BASE) | $(BIN)/python
	$(PIP) --require-hashes --no-deps -r $(LOCK_BASE)
	$(PIP) --no-deps --no-build-isolation -e client -e .
	touch $@

# Every extra the suite exercises, then torch from TORCH_INDEX (its dependencies are in the lock).
# The trainers whose own code the tests run (verl, OpenRLHF) are not here: each has a venv of
# its own (`make trainer-envs`).
$(VENV)/.all: pyproject.toml client/pyproject.toml $(LOCK_ALL) $(LOCK_TORCH) | $(BIN)/python
	$(PIP) --require-hashes --no-deps -r $(LOCK_ALL)
	$(PIP) --no-deps --index-url $(TORCH_INDEX) -r $(LOCK_TORCH)
	$(PIP) --no-deps --no-build-isolation -e client -e .
	touch $@ $(VENV)/.base

up: tools $(VENV)/.base
	$(BIN)/tribunal up

# The full development environment, without running anything: every extra, torch, the
# protocols' and the trainers' own venvs, and the system tools the suite needs (the browser for
# the inspector's tests included).
dev: tools $(VENV)/.all protocol-envs trainer-envs
	@PYTHON=$(PYTHON) scripts/setup-tools.sh --browser

# The environment protocols' released clients, each in a venv of its own from its own hashed lock
# (requirements/protocol-envs/): built once, kept while the lock is unchanged.
# NeMo Gym 0.4 needs Python 3.12 (PYTHON312: pyenv's 3.12, else python3.12 on the PATH; CI's
# image provides one the same way).
PYTHON312 ?= $(or $(lastword $(wildcard $(HOME)/.pyenv/versions/3.12.*/bin/python)),$(shell command -v python3.12))
protocol-envs:
	PYTHON=$(PYTHON) scripts/protocol_envs.sh venv openreward
	PYTHON=$(PYTHON) scripts/protocol_envs.sh venv openenv
	PYTHON=$(PYTHON312) scripts/protocol_envs.sh venv nemo-gym

# The trainers whose own code the integration tests run, each installed as its users install it
# (its own declared dependency ranges, from requirements/trainer-envs/<trainer>.txt, a hashed
# lock of its own; torch from TORCH_INDEX) with only tribunal-client (client/) added where it uses
# it: .venv-verl, .venv-openrlhf and .venv-trl (TRL with its openreward extra, no client)
# (scripts/trainer_envs.sh; built once, kept while the lock,
# torch's pin and client/pyproject.toml are unchanged). `scripts/trainer_envs.sh lock TRAINER`
# recompiles a lock.
trainer-envs:
	PYTHON=$(PYTHON) TORCH_INDEX=$(TORCH_INDEX) scripts/trainer_envs.sh venv verl
	PYTHON=$(PYTHON) TORCH_INDEX=$(TORCH_INDEX) scripts/trainer_envs.sh venv openrlhf
	PYTHON=$(PYTHON) TORCH_INDEX=$(TORCH_INDEX) scripts/trainer_envs.sh venv trl

# The public data sets the docs, the tutorial, the benchmarks and the tests read, into
# TRIBUNAL_DATA_DIR (default ../shared/data): `tribunal data fetch`, from each one's public source
# at a pinned commit, checksummed; DATA_FROM=DIR or URL takes them from a copy or mirror instead.
DATA_FROM ?=
data: $(VENV)/.base
	$(BIN)/tribunal data fetch$(if $(DATA_FROM), --from $(DATA_FROM))

# What compose's `train` profile runs, against a `make up` in another terminal: the datasets
# from TRIBUNAL_DATA_DIR (`make data`), then `tribunal train` (TRAIN_CONFIG, TRAIN_OUT to change them).
TRAIN_CONFIG ?= trainer/tribunal/trainer/configs/stack_rloo_cpu.yaml
TRAIN_OUT ?= runs/train
train: tools $(VENV)/.all
	$(BIN)/python -m bench.training_data runs/stack-data --rows 16
	$(BIN)/tribunal train --config $(TRAIN_CONFIG) --output-dir $(TRAIN_OUT)

test: dev
	$(MAKE) check-lock lint
	$(BIN)/python -m pytest -m "not gpu and not extended" --durations=25

# CI's other lane (.ci/run runs it too): each benchmark's quick run, and the tests that run
# another project's released code in that project's own venv (tests/conftest.py names them).
test-extended: dev
	$(BIN)/python -m pytest -m "extended and not gpu" --durations=10

# While you work: every test that starts no service process and takes under a few seconds
# (markers e2e and slow left out; tests/conftest.py marks the folders that start processes).
test-fast: dev
	$(BIN)/python -m pytest -m "not e2e and not slow and not gpu and not extended" -q

# pyproject.toml, the locks and the venv agree (scripts/check_lock.py says what does not).
check-lock: $(VENV)/.all
	$(BIN)/python scripts/check_lock.py --venv all

lock:
	@PYTHON=$(PYTHON) scripts/lock.sh

lint: $(VENV)/.all
	$(BIN)/ruff check client services trainer bench tests scripts
	$(BIN)/ruff format --check client services trainer bench tests scripts
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

# The Grafana dashboard and the Prometheus alert rules under docker/monitoring/, generated
# (scripts/monitoring.py; tests/e2e/test_monitoring.py fails when they are stale).
monitoring: $(VENV)/.all
	$(BIN)/python scripts/monitoring.py

bench-math: $(VENV)/.base
	$(BIN)/python -m bench run math_throughput

clean:
	rm -rf $(VENV) .lock-venv .mypy_cache .ruff_cache site
