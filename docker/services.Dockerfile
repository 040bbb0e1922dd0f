# The services image (math, judge, and the other services that need no sandbox): no torch, no
# compiler, runs as an unprivileged user.
#
# BASE is the official image by default; where no registry is reachable, scripts/compose-base.sh
# builds a Debian bookworm base from the host's apt mirror (compose.yaml passes it through
# TRIBUNAL_BASE_IMAGE). Either way Tribunal lives in a venv of its own (Debian's pip refuses to
# install into the system Python), without pip at run time: the base's pip installs Tribunal.
# The first two steps are the same in code.Dockerfile, so the two images share those layers.
ARG BASE=python:3.11-slim

# Third-party dependencies as a list read from pyproject.toml: the (slow) layer that installs
# them is rebuilt only when that list changes, not on every change to the code.
FROM ${BASE} AS requirements
COPY pyproject.toml /
RUN python3 -c "import tomllib; print(*tomllib.load(open('/pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" >/requirements.txt

FROM ${BASE}
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=requirements /requirements.txt /opt/requirements.txt
# Bytecode is compiled at install: a process (and a 5 s healthcheck) starts in ~1 s, not ~5.
# The packages' own test suites (sympy's: 35 MB) are not needed to run them.
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install -r /opt/requirements.txt \
    && /opt/venv/bin/pip uninstall --yes --quiet pip setuptools \
    && find /opt/venv -depth -type d -name tests -exec rm -rf {} +
RUN useradd --uid 10001 --create-home tribunal
# (COPY, not a bind mount: buildah does not hash a mount's content, so a change to the code
# would reuse a stale layer.)
COPY pyproject.toml README.md /src/
COPY services /src/services
COPY trainer /src/trainer
RUN PYTHONPATH=$(python3 -c 'import os, pip; print(os.path.dirname(os.path.dirname(pip.__file__)))') \
    /opt/venv/bin/python -m pip install --no-deps /src \
    && rm -rf /src
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /home/tribunal
USER tribunal
EXPOSE 8101 8103
CMD ["tribunal", "up"]
