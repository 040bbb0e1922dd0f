# The code runner image: the services plus bubblewrap, a sandbox Python and g++.
#
# The worker runs as root *inside the container* (not --privileged): it switches each
# sandbox to an unprivileged uid of its own (one per slot) and kills that uid's processes
# afterwards, which needs CAP_SETUID, CAP_SETGID and CAP_KILL (Docker's defaults). bubblewrap
# also needs to create namespaces and mount a fresh /proc: see the code-worker service in
# compose.yaml for the security options that allows. The worker refuses to start, with a
# message, when the sandbox cannot isolate.
#
# BASE and the first steps as in services.Dockerfile (shared layers). The sandbox runs
# Debian's /usr/bin/python3 (with python3-sortedcontainers), Tribunal its own venv.
ARG BASE=python:3.11-slim

FROM ${BASE} AS requirements
COPY pyproject.toml /
RUN python3 -c "import tomllib; print(*tomllib.load(open('/pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" >/requirements.txt

FROM ${BASE}
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=requirements /requirements.txt /opt/requirements.txt
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install -r /opt/requirements.txt \
    && /opt/venv/bin/pip uninstall --yes --quiet pip setuptools \
    && find /opt/venv -depth -type d -name tests -exec rm -rf {} +
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        bubblewrap g++ python3 python3-sortedcontainers util-linux \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log
# (COPY, not a bind mount: buildah does not hash a mount's content, so a change to the code
# would reuse a stale layer.)
COPY pyproject.toml README.md /src/
COPY services /src/services
COPY trainer /src/trainer
RUN PYTHONPATH=$(python3 -c 'import os, pip; print(os.path.dirname(os.path.dirname(pip.__file__)))') \
    /opt/venv/bin/python -m pip install --no-deps /src \
    && rm -rf /src
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /root
EXPOSE 8102
CMD ["tribunal", "worker", "code"]
