# The services image (math, judge, and the other services that need no sandbox): no torch, no
# compiler, runs as an unprivileged user.
#
# BASE is the official image by default; where no registry is reachable, scripts/compose-base.sh
# builds a Debian bookworm base from the host's apt mirror (compose.yaml passes it through
# TRIBUNAL_BASE_IMAGE). Either way Tribunal lives in a venv of its own (Debian's pip refuses to
# install into the system Python), without pip at run time: the venv's pip installs the lock
# and Tribunal, then goes.
# The first two steps are the same in code.Dockerfile, so the two images share those layers.
ARG BASE=python:3.11-slim

FROM ${BASE}
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# The services' lock (requirements/base.txt, `make lock`): the slow layer that installs it is
# rebuilt only when the lock changes, not on every change to the code.
COPY requirements/base.txt /opt/requirements.txt
# Bytecode is compiled at install: a process (and a 5 s healthcheck) starts in ~1 s, not ~5.
# The packages' own test suites (sympy's: 35 MB) are not needed to run them.
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes --no-deps -r /opt/requirements.txt \
    && find /opt/venv -depth -type d -name tests -exec rm -rf {} +
RUN useradd --uid 10001 --create-home tribunal
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
WORKDIR /home/tribunal
USER tribunal
EXPOSE 8101 8103
CMD ["tribunal", "up"]
