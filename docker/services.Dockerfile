# The services image (math, judge, and the other services that need no sandbox): no torch, no
# compiler, runs as an unprivileged user.
#
# BASE is the official image by default; where no registry is reachable, scripts/compose-base.sh
# builds a Debian bookworm base from the host's apt mirror (compose.yaml passes it through
# TRIBUNAL_BASE_IMAGE). Either way Tribunal lives in a venv of its own (/opt/venv): Debian's
# system pip refuses to install into the system Python.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
WORKDIR /src
# Third-party dependencies first, read from pyproject.toml alone, so that a change to the code
# reuses this (slow) layer.
COPY pyproject.toml ./
RUN python3 -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" >requirements.txt \
    && /opt/venv/bin/pip install --no-compile -r requirements.txt
COPY README.md ./
COPY services ./services
COPY trainer ./trainer
# pip and setuptools are not needed at run time: drop them from the venv.
RUN /opt/venv/bin/pip install --no-compile --no-deps . \
    && /opt/venv/bin/pip uninstall --yes --quiet pip setuptools

FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH
RUN useradd --uid 10001 --create-home tribunal
COPY --from=build /opt/venv /opt/venv
WORKDIR /home/tribunal
USER tribunal
EXPOSE 8101 8103
CMD ["tribunal", "up"]
