#!/usr/bin/env bash
# `make lock`: compile pyproject.toml into the two locks every install reads, with hashes.
#
#   requirements/all.txt   every extra the suite exercises (make test, .ci/run, the device runs)
#   requirements/base.txt  the services alone (make up, the images), pinned to all.txt's versions
#   requirements/trainer.txt  the services and the trainer extra (docker/trainer.Dockerfile),
#                          pinned to all.txt's versions
#
# pip-tools runs in a venv of its own (.lock-venv) so that the project's venv holds exactly the
# lock. torch resolves to the CPU build this machine's pip finds on disk (its find-links).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
tool=.lock-venv
if [ ! -x "$tool/bin/pip-compile" ]; then
  "$python" -m venv "$tool"
  "$tool/bin/pip" install --quiet --disable-pip-version-check pip-tools==7.6.2
fi
export CUSTOM_COMPILE_COMMAND="make lock"
# tribunal-client, which the services depend on, is this repository's client/ (installed from
# there, like the root), on no index: pip-compile finds its wheel in a folder of its own, and
# each lock is left without it.
client_wheel=$(mktemp -d)
trap 'rm -rf "$client_wheel"' EXIT
"$tool/bin/pip" wheel --quiet --disable-pip-version-check --no-deps -w "$client_wheel" ./client
common=(--quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url
  --no-emit-find-links --build-deps-for editable --find-links "$client_wheel" "$@")
"$tool/bin/pip-compile" "${common[@]}" --extra dev --extra judge-local --extra trainer \
  --extra trl --extra compose --extra docs --extra protocols --extra load --extra browser \
  -o requirements/all.txt pyproject.toml
"$tool/bin/pip-compile" "${common[@]}" -c requirements/all.txt -o requirements/base.txt \
  pyproject.toml
"$tool/bin/pip-compile" "${common[@]}" --extra trainer -c requirements/all.txt \
  -o requirements/trainer.txt pyproject.toml
for lock in requirements/all.txt requirements/base.txt requirements/trainer.txt; do
  # the pin of tribunal-client and its hash lines, up to the next requirement
  awk '/^tribunal-client==/ {skip=1; next} skip && /^[^ ]/ {skip=0} !skip' "$lock" >"$lock.tmp"
  mv "$lock.tmp" "$lock"
done
