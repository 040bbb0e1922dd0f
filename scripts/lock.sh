#!/usr/bin/env bash
# `make lock`: compile pyproject.toml into the two locks every install reads, with hashes.
#
#   requirements/all.txt   every extra the suite exercises (make test, .ci/run, the device runs)
#   requirements/base.txt  the services alone (make up, the images), pinned to all.txt's versions
#   requirements/trainer.txt  the services and the trainer extra (docker/trainer.Dockerfile),
#                          pinned to all.txt's versions
#
#   requirements/torch.txt    torch alone, by hand: its version, no hash (its build comes from
#                          PyTorch's index, TORCH_INDEX; see that file)
#
# pip-tools runs in a venv of its own (.lock-venv) so that the project's venv holds exactly the
# lock. torch is held at torch.txt's version and resolved on PyTorch's CPU index (TORCH_INDEX;
# where that index cannot be reached, from pip's own find-links or cache), so that its dependencies
# are those of the CPU build, hashed from PyPI like every other pin; then it is taken out of
# all.txt and trainer.txt, whose one hash of it would refuse every Python but the lock's.
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
torch_index=${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
# pip asks every index for every package: an index that cannot be reached costs each lookup its
# retries (about 10 s), so it is named only when it answers.
torch_from=()
if "$tool/bin/python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' \
  "$torch_index/torch/" 2>/dev/null; then
  torch_from=(--extra-index-url "$torch_index")
else
  echo "lock: $torch_index cannot be reached: torch $(sed -n 's/^torch==//p' requirements/torch.txt) is" \
    "resolved from pip's own configuration (its find-links, its cache)" >&2
fi
common=(--quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url
  --no-emit-find-links --build-deps-for editable "${torch_from[@]}" --find-links "$client_wheel"
  -c requirements/torch.txt "$@")
"$tool/bin/pip-compile" "${common[@]}" --extra dev --extra judge-local --extra trainer \
  --extra trl --extra compose --extra docs --extra protocols --extra load --extra browser \
  -o requirements/all.txt pyproject.toml
"$tool/bin/pip-compile" "${common[@]}" -c requirements/all.txt -o requirements/base.txt \
  pyproject.toml
"$tool/bin/pip-compile" "${common[@]}" --extra trainer -c requirements/all.txt \
  -o requirements/trainer.txt pyproject.toml
# torch's block (its pin, its one hash, its `# via` lines) leaves the hashed locks.
"$tool/bin/python" - requirements/all.txt requirements/trainer.txt <<'EOF'
import re
import sys
from pathlib import Path

for lock in map(Path, sys.argv[1:]):
    lock.write_text(re.sub(r"^torch==.*\n(?:    .*\n)*", "", lock.read_text(), flags=re.M))
EOF
for lock in requirements/all.txt requirements/base.txt requirements/trainer.txt; do
  # the pin of tribunal-client and its hash lines, up to the next requirement
  awk '/^tribunal-client==/ {skip=1; next} skip && /^[^ ]/ {skip=0} !skip' "$lock" >"$lock.tmp"
  mv "$lock.tmp" "$lock"
done
