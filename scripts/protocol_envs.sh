#!/usr/bin/env bash
# The environment protocols' released clients, each in a venv of its own, from a hashed lock of
# its own (requirements/protocol-envs/<client>.txt): their pins cannot share the main lock
# (openreward 0.1.167 pins sse-starlette==2.3.6; the main lock's mcp needs sse-starlette>=3).
#
#   scripts/protocol_envs.sh lock openreward    compile <client>.in into <client>.txt (hashes)
#   scripts/protocol_envs.sh venv openreward    build .venv-<client> from the lock, once: a venv
#                                               whose stamp matches the lock is kept as it is
#
# PYTHON picks the interpreter of both (default python3); NeMo Gym 0.4 needs Python 3.12:
#   PYTHON=python3.12 scripts/protocol_envs.sh lock|venv nemo-gym
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
action=$1
name=$2
lock=requirements/protocol-envs/$name.txt
case "$action" in
  lock)
    # pip-compile resolves for the Python it runs on: a tool venv per Python version.
    tool=.lock-venv-$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [ ! -x "$tool/bin/pip-compile" ]; then
      "$python" -m venv "$tool"
      "$tool/bin/pip" install --quiet --disable-pip-version-check pip-tools==7.6.2
    fi
    CUSTOM_COMPILE_COMMAND="scripts/protocol_envs.sh lock $name" "$tool/bin/pip-compile" \
      --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
      --no-emit-find-links -o "$lock" "requirements/protocol-envs/$name.in"
    ;;
  venv)
    venv=.venv-$name
    # One build at a time per venv: a second `make dev` or a test that asks for the venv
    # while it is being built waits here, then finds the stamp, instead of deleting it.
    exec 9>"$venv.lock"
    flock 9
    stamp=$(sha256sum "$lock" | cut -d' ' -f1)
    if [ -f "$venv/lock.sha256" ] && [ "$(cat "$venv/lock.sha256")" = "$stamp" ]; then
      exit 0
    fi
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes \
      -r "$lock"
    echo "$stamp" >"$venv/lock.sha256"
    ;;
  *)
    echo "usage: $0 lock|venv CLIENT" >&2
    exit 2
    ;;
esac
