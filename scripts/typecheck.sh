#!/usr/bin/env bash
# mypy --strict on the package `tribunal`: its three portions, client/tribunal/ (the client
# distribution), services/tribunal/ and trainer/tribunal/, each module named from its path under
# pyproject's mypy_path.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/mypy --config-file pyproject.toml client/tribunal services/tribunal trainer/tribunal "$@"
