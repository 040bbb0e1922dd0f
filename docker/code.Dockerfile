# The code runner image: the services plus bubblewrap, a sandbox Python and g++.
#
# The worker runs as root *inside the container* (not --privileged): it switches each
# sandbox to an unprivileged uid of its own (one per slot) and kills that uid's processes
# afterwards, which needs CAP_SETUID, CAP_SETGID and CAP_KILL (Docker's defaults). bubblewrap
# also needs to create namespaces and mount a fresh /proc: see the code-worker service in
# compose.yaml for the security options that allows. The worker refuses to start, with a
# message, when the sandbox cannot isolate.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        bubblewrap g++ python3 python3-sortedcontainers util-linux \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY services ./services
COPY trainer ./trainer
RUN pip install --no-compile . && rm -rf /root/.cache
EXPOSE 8102
CMD ["tribunal", "worker", "code"]
