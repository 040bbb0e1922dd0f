# Sourced by scripts/compose-test.sh and for bench/compose.py: what podman needs to run
# compose.yaml's stack on this kind of machine.
# Installs podman, runc and debootstrap (apt) when missing; exports CONTAINERS_CONF
# (docker/containers.conf), and TRIBUNAL_BASE_IMAGE / TRIBUNAL_REDIS_IMAGE: the official images
# when they can be pulled, else local Debian ones (scripts/compose-base.sh, built once, reused).
# Env in: TRIBUNAL_BASE_IMAGE / TRIBUNAL_REDIS_IMAGE to choose the images yourself;
#   TRIBUNAL_HOST_CA=1|0 to trust the host's extra CAs in a locally built base or not (a proxy
#   with its own CA between this host and PyPI); default: yes when the host has such CAs.
missing=()
for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/docker/containers.conf}
if [ "${TRIBUNAL_HOST_CA:-auto}" = auto ]; then
  TRIBUNAL_HOST_CA=0
  compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null && TRIBUNAL_HOST_CA=1
fi
export TRIBUNAL_HOST_CA

# A pull that cannot work fails at once (no DNS for the registry): no long hang.
_pullable() { podman image exists "$1" || timeout 120 podman pull -q "$1" >/dev/null 2>&1; }
if [ -z "${TRIBUNAL_BASE_IMAGE:-}" ] || [ -z "${TRIBUNAL_REDIS_IMAGE:-}" ]; then
  if _pullable docker.io/library/python:3.11-slim && _pullable docker.io/library/redis:7.2-alpine; then
    export TRIBUNAL_BASE_IMAGE=${TRIBUNAL_BASE_IMAGE:-docker.io/library/python:3.11-slim}
    export TRIBUNAL_REDIS_IMAGE=${TRIBUNAL_REDIS_IMAGE:-docker.io/library/redis:7.2-alpine}
  else
    echo "no registry reachable: local Debian base images (scripts/compose-base.sh)"
    nice -n 10 scripts/compose-base.sh
    export TRIBUNAL_BASE_IMAGE=${TRIBUNAL_BASE_IMAGE:-localhost/tribunal-base:bookworm}
    export TRIBUNAL_REDIS_IMAGE=${TRIBUNAL_REDIS_IMAGE:-localhost/tribunal-redis:bookworm}
  fi
fi
