# The trainer image (compose profile `train`): Tribunal with the trainer extra (torch,
# DeepSpeed, transformers, datasets) from its lock, requirements/trainer.txt (`make lock`),
# runs `tribunal train` as an unprivileged user. Rewards come from the gateway over HTTP: the
# trainer imports no verifier.
#
# BASE as in services.Dockerfile. torch is not in the hashed lock: requirements/torch.txt pins
# its version and PyTorch's index (TORCH_INDEX) supplies the build, the CPU one by default; for
# a GPU run, build FROM a CUDA base with TORCH_INDEX=https://download.pytorch.org/whl/cu128. DeepSpeed compiles no op at install
# (DS_BUILD_OPS=0): on CPU the trainer uses torch's AdamW and gloo.
ARG BASE=python:3.11-slim

FROM ${BASE}
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 DS_BUILD_OPS=0
# The lock first: the slow layer that installs it is rebuilt only when the lock changes.
COPY requirements/trainer.txt /opt/requirements.txt
COPY requirements/torch.txt /opt/torch.txt
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes --no-deps -r /opt/requirements.txt \
    && /opt/venv/bin/pip install --no-deps --index-url "${TORCH_INDEX}" -r /opt/torch.txt \
    && find /opt/venv -depth -type d -name tests -exec rm -rf {} +
RUN useradd --uid 10001 --create-home tribunal \
    && mkdir /runs && chown tribunal /runs
# (COPY, not a bind mount: buildah does not hash a mount's content, so a change to the code
# would reuse a stale layer.)
COPY pyproject.toml README.md /src/
COPY services /src/services
COPY trainer /src/trainer
COPY client /src/client
# Built with the locked setuptools (no build isolation), then pip goes: nothing installs at run
# time. setuptools stays: DeepSpeed's op builders import it.
RUN /opt/venv/bin/pip install --no-deps --no-build-isolation /src/client /src \
    && /opt/venv/bin/pip uninstall --yes --quiet pip \
    && rm -rf /src
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /home/tribunal
USER tribunal
VOLUME /runs
CMD ["tribunal", "train", "--config", "/config/train.yaml", "--output-dir", "/runs/run"]
