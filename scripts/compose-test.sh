#!/usr/bin/env bash
# `make compose-test`: compose.yaml's stack for real, in containers (podman + podman-compose).
# scripts/compose-env.sh installs and configures podman and picks the base images (official,
# or local Debian ones where no registry is reachable); then tests/e2e/test_compose.py's
# container test builds the images, brings up every service but the gpu profile, runs the
# README's curl examples, kills a worker mid-job, and brings the stack down. Whatever
# happens, no container, network or volume of the test's project is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
project=tribunal-compose-test

# Debian's podman-compose (1.0.3) leaves `${VAR:-}` unexpanded: PyPI's, in the venv (the
# `compose` extra, which `make compose-test` installs).
if [ ! -x "$venv/bin/podman-compose" ]; then
  echo "no $venv/bin/podman-compose: run make compose-test" >&2
  exit 1
fi
. scripts/compose-env.sh

# The test brings its stack down itself; this catches what an interrupted run leaves.
cleanup() {
  local label="label=com.docker.compose.project=$project"
  podman ps -aq --filter "$label" | xargs -r podman rm -f -t 0 >/dev/null 2>&1 || true
  podman pod ls -q --filter "name=pod_$project" | xargs -r podman pod rm -f >/dev/null 2>&1 || true
  podman network ls -q --filter "$label" | xargs -r podman network rm -f >/dev/null 2>&1 || true
  podman volume ls -q --filter "$label" | xargs -r podman volume rm -f >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM
cleanup

TRIBUNAL_COMPOSE_TEST=1 "$venv/bin/python" -m pytest -q -rs --timeout 1500 \
  "tests/e2e/test_compose.py::test_the_stack_runs_in_containers" "$@"
