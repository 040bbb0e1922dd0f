#!/usr/bin/env bash
# `make compose-test`: compose.yaml's stack for real, in containers (podman + podman-compose).
# Installs podman, runc and debootstrap (apt) and podman-compose (PyPI, into .venv) when
# missing; uses the official base images when they can be pulled, else builds (or reuses)
# local ones (scripts/compose-base.sh); then runs tests/e2e/test_compose.py's container test:
# build the images, bring up every service but the gpu profile, the README's curl examples,
# a worker killed mid-job, down. Whatever happens, no container, network or volume of the
# test's project is left behind.
# Env: TRIBUNAL_BASE_IMAGE / TRIBUNAL_REDIS_IMAGE to choose the images yourself;
#      TRIBUNAL_HOST_CA=1 to trust the host's extra CAs in a locally built base (a proxy with
#      its own CA between this host and PyPI; on by default when the host has such CAs).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
project=tribunal-compose-test

missing=()
for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Debian's podman-compose (1.0.3) leaves `${VAR:-}` unexpanded: PyPI's, in the venv (the
# `compose` extra, which `make compose-test` installs).
[ -x "$venv/bin/podman-compose" ] || { echo "no $venv/bin/podman-compose: run make compose-test" >&2; exit 1; }

export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/docker/containers.conf}

# A pull that cannot work fails at once (no DNS for the registry): no long hang.
pullable() { podman image exists "$1" || timeout 120 podman pull -q "$1" >/dev/null 2>&1; }
if [ -z "${TRIBUNAL_BASE_IMAGE:-}" ] || [ -z "${TRIBUNAL_REDIS_IMAGE:-}" ]; then
  if pullable docker.io/library/python:3.11-slim && pullable docker.io/library/redis:7.2-alpine; then
    export TRIBUNAL_BASE_IMAGE=${TRIBUNAL_BASE_IMAGE:-docker.io/library/python:3.11-slim}
    export TRIBUNAL_REDIS_IMAGE=${TRIBUNAL_REDIS_IMAGE:-docker.io/library/redis:7.2-alpine}
  else
    echo "compose-test: no registry reachable; local Debian base images (scripts/compose-base.sh)"
    ca=()
    if [ "${TRIBUNAL_HOST_CA:-auto}" = 1 ] || { [ "${TRIBUNAL_HOST_CA:-auto}" = auto ] \
      && compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; }; then
      ca=(--host-ca)
    fi
    nice -n 10 scripts/compose-base.sh "${ca[@]}"
    export TRIBUNAL_BASE_IMAGE=${TRIBUNAL_BASE_IMAGE:-localhost/tribunal-base:bookworm}
    export TRIBUNAL_REDIS_IMAGE=${TRIBUNAL_REDIS_IMAGE:-localhost/tribunal-redis:bookworm}
  fi
fi

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
