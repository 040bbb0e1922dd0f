#!/usr/bin/env bash
# Build local base images for the Dockerfiles where no image registry can be reached, from
# the Debian mirror apt already uses (debootstrap --variant=minbase, then `podman import`):
#   localhost/tribunal-base:bookworm   Debian bookworm + python3 (3.11), venv, pip, CA bundle
#   localhost/tribunal-redis:bookworm  the same + Debian's redis-server (stands in for redis:7.2-alpine)
# Both are reused when they exist (pass --rebuild to make them again).
#
# Usage: scripts/compose-base.sh [--host-ca] [--rebuild]
#   --host-ca  trust this host's extra CA certificates (/usr/local/share/ca-certificates)
#              inside the images, and point pip at the system bundle: needed where the host
#              reaches package registries through a proxy with its own certificate authority.
#              Off by default (or TRIBUNAL_HOST_CA=1): an image should not trust a CA its
#              user never chose.
# Needs root, podman and debootstrap. Env: CONTAINERS_CONF as for the rest of the stack.
set -euo pipefail

base=localhost/tribunal-base:bookworm
redis=localhost/tribunal-redis:bookworm
host_ca=$([ "${TRIBUNAL_HOST_CA:-0}" = 1 ] && echo 1 || echo 0)
rebuild=0
for arg in "$@"; do
  case $arg in
    --host-ca) host_ca=1 ;;
    --rebuild) rebuild=1 ;;
    *) echo "unknown option: $arg" >&2; exit 2 ;;
  esac
done

# The mirror of the host's first Debian source (deb822 `URIs:` or one-line `deb URL suite`).
mirror() {
  local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list)
  local found
  found=$(cat "${files[@]}" 2>/dev/null \
    | sed -n -E 's#^URIs:[[:space:]]*(\S*/debian)/?$#\1#p; s#^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?(\S*/debian)/?[[:space:]].*#\2#p' \
    | head -n 1)
  echo "${found:-http://deb.debian.org/debian}"
}

if [ "$rebuild" = 0 ] && podman image exists "$base"; then
  echo "reusing $base"
else
  rootfs=$(mktemp -d /var/tmp/tribunal-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  url=$(mirror)
  echo "debootstrap bookworm from $url"
  debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    bookworm "$rootfs" "$url" >"$rootfs.log" 2>&1 || { tail -n 30 "$rootfs.log"; exit 1; }
  rm -f "$rootfs.log"
  # What the official slim images leave out too: documentation, manuals, locales, caches;
  # the dpkg excludes keep later `apt-get install` layers as small.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/01-slim" <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
EOF
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  rm -rf "$rootfs"/usr/share/{man,info,locale}/* "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/*.log
  changes=(--change 'CMD ["python3"]' --change 'ENV LANG=C.UTF-8')
  if [ "$host_ca" = 1 ]; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null
    changes+=(--change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt')
  fi
  tar -C "$rootfs" -c . | podman import "${changes[@]}" - "$base" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
  echo "built $base"
fi

if [ "$rebuild" = 0 ] && podman image exists "$redis"; then
  echo "reusing $redis"
else
  podman build --quiet --build-arg "BASE=$base" -t "$redis" \
    -f "$(dirname "$0")/../docker/redis.Dockerfile" "$(dirname "$0")/../docker" >/dev/null
  echo "built $redis"
fi
