# Debian's redis-server, for hosts that cannot pull redis:7.2-alpine (no registry reachable):
# scripts/compose-base.sh builds it on its local Debian base, and compose.yaml takes it through
# TRIBUNAL_REDIS_IMAGE. Same command, data directory and `redis-cli ping` healthcheck.
# The official image builds Redis with protected mode off (other containers connect without a
# password on the compose network); the entrypoint adds `--protected-mode no` to match.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
    && mkdir -p /data && chown redis:redis /data \
    && printf '#!/bin/sh\nif [ "$1" = redis-server ]; then shift; exec redis-server "$@" --protected-mode no; fi\nexec "$@"\n' \
        >/usr/local/bin/redis-entrypoint && chmod 755 /usr/local/bin/redis-entrypoint
WORKDIR /data
USER redis
EXPOSE 6379
ENTRYPOINT ["redis-entrypoint"]
CMD ["redis-server"]
