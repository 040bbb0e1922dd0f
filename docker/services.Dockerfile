# The services image (math, judge): no torch, no compiler. Runs as an unprivileged user.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN useradd --uid 10001 --create-home tribunal
WORKDIR /app
COPY pyproject.toml README.md ./
COPY services ./services
COPY trainer ./trainer
RUN pip install --no-compile . && rm -rf /root/.cache
USER tribunal
EXPOSE 8101 8103
CMD ["tribunal", "up"]
