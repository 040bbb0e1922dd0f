# The code runner image: the services plus bubblewrap, a sandbox Python and g++.
#
# The worker runs as root *inside the container* (not --privileged): it switches each
# sandbox to an unprivileged uid of its own (one per slot) and kills that uid's processes
# afterwards, which needs CAP_SETUID, CAP_SETGID and CAP_KILL (Docker's defaults). bubblewrap
# also needs to create namespaces and mount a fresh /proc: see the code-worker service in
# compose.yaml for the security options that allows. The worker refuses to start, with a
# message, when the sandbox cannot isolate.
#
# BASE: as in services.Dockerfile (the official image, or the local Debian base). The sandbox
# runs Debian's /usr/bin/python3 (with python3-sortedcontainers), Tribunal its own venv.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml ./
RUN python3 -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" >requirements.txt \
    && /opt/venv/bin/pip install --no-compile -r requirements.txt
COPY README.md ./
COPY services ./services
COPY trainer ./trainer
RUN /opt/venv/bin/pip install --no-compile --no-deps . \
    && /opt/venv/bin/pip uninstall --yes --quiet pip setuptools

FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        bubblewrap g++ python3 python3-sortedcontainers util-linux \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log
COPY --from=build /opt/venv /opt/venv
WORKDIR /root
EXPOSE 8102
CMD ["tribunal", "worker", "code"]
