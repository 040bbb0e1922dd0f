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

FROM ${BASE}
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# The services' lock (requirements/base.txt, `make lock`): the slow layer that installs it is
# rebuilt only when the lock changes, not on every change to the code.
COPY requirements/base.txt /opt/requirements.txt
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes --no-deps -r /opt/requirements.txt \
    && find /opt/venv -depth -type d -name tests -exec rm -rf {} +
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        bubblewrap g++ libseccomp2 python3 python3-sortedcontainers util-linux \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log
# (COPY, not a bind mount: buildah does not hash a mount's content, so a change to the code
# would reuse a stale layer.)
COPY pyproject.toml README.md /src/
COPY services /src/services
COPY trainer /src/trainer
COPY client /src/client
# Built with the locked setuptools (no build isolation), then pip and setuptools go: nothing
# installs at run time.
RUN /opt/venv/bin/pip install --no-deps --no-build-isolation /src/client /src \
    && /opt/venv/bin/pip uninstall --yes --quiet pip setuptools \
    && rm -rf /src
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /root
EXPOSE 8102
CMD ["tribunal", "worker", "code"]
