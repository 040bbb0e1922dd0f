#!/usr/bin/env bash
# mypy on the `tribunal` package as it installs: `services/` is `tribunal`, `trainer/` is
# `tribunal.trainer` (pyproject's package-dir). mypy cannot follow setuptools' editable-install
# finder, so it reads a tree of symlinks laid out like the installed package.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=.typecheck
rm -rf "$tree"
mkdir -p "$tree/tribunal"
for entry in services/*; do
  ln -s "../../$entry" "$tree/tribunal/$(basename "$entry")"
done
ln -s ../../trainer "$tree/tribunal/trainer"
cd "$tree"
exec ../.venv/bin/mypy --config-file ../pyproject.toml --cache-dir ../.mypy_cache -p tribunal "$@"
