#!/usr/bin/env bash
# The trainers whose own code the integration tests run (verl, OpenRLHF, TRL with its openreward
# extra), each installed as its users install it: its own declared dependency ranges, resolved
# into a hashed lock of its own (requirements/trainer-envs/<trainer>.txt), in a venv of its own
# (.venv-<trainer>), with only tribunal-client (client/) added where it uses it, as
# docs/integrations.md installs it. Their pins cannot share the main lock (transformers: OpenRLHF
# 0.11.2 pins ==5.15.0, verl 0.9.1 wants <5.11; verl's Hydra needs the ANTLR 4.9 runtime, the
# math verifier's math-verify 4.13; trl[openreward]'s openreward 0.1.167 pins
# sse-starlette==2.3.6, the main lock's mcp needs >=3).
#
#   scripts/trainer_envs.sh lock verl    compile <trainer>.in into <trainer>.txt (hashes)
#   scripts/trainer_envs.sh venv verl    build .venv-<trainer> from the lock, once: a venv whose
#                                        stamp matches its inputs is kept as it is
#
# Three things of the venv are not in the lock:
# - torch, from TORCH_INDEX at requirements/torch.txt's version, as the main venv takes it (the
#   lock is compiled against that pin, then its block is taken out);
# - tribunal-client, this repository's client/, installed editable without its dependencies
#   (they are in the lock: the compile sees the client's wheel), where <trainer>.in names it
#   (trl's does not: its adapter talks to Tribunal with the openreward SDK alone);
# - the packages a <trainer>.in names on a `# left out: NAME==VERSION: why` line, which cannot
#   install without a GPU: the compile sees an empty stand-in wheel of that name and version
#   (so the rest resolves as the trainer declares it), and the stand-in's block is taken out.
#   `pip check` in the venv names exactly these (tests/integrations/test_trainer_envs.py).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
action=$1
name=$2
in=requirements/trainer-envs/$name.in
lock=requirements/trainer-envs/$name.txt
torch_index=${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
pip=(--quiet --disable-pip-version-check)
case "$action" in
  lock)
    tool=.lock-venv-$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [ ! -x "$tool/bin/pip-compile" ]; then
      "$python" -m venv "$tool"
      "$tool/bin/pip" install "${pip[@]}" pip-tools==7.6.2
    fi
    wheels=$(mktemp -d)
    trap 'rm -rf "$wheels"' EXIT
    "$tool/bin/pip" wheel "${pip[@]}" --no-deps -w "$wheels" ./client
    left_out=$(sed -n 's/^# left out: \([^:]*\):.*/\1/p' "$in")
    "$tool/bin/python" - "$wheels" $left_out <<'PY'
import sys
import zipfile
from pathlib import Path

# An empty wheel per left-out NAME==VERSION: metadata only, for the resolver.
folder = Path(sys.argv[1])
for pin in sys.argv[2:]:
    name, version = pin.split("==")
    dist = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as wheel:
        info = f"{dist}.dist-info"
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: stand-in\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
PY
    CUSTOM_COMPILE_COMMAND="scripts/trainer_envs.sh lock $name" "$tool/bin/pip-compile" \
      --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
      --no-emit-find-links --find-links "$wheels" -c requirements/torch.txt -o "$lock" "$in"
    # torch's, tribunal-client's and the stand-ins' blocks (pin, hashes, `# via` lines) leave it.
    client=$(grep -qx tribunal-client "$in" && echo tribunal-client || true)
    "$tool/bin/python" - "$lock" torch $client $left_out <<'PY'
import re
import sys
from pathlib import Path

lock = Path(sys.argv[1])
text = lock.read_text()
for pin in sys.argv[2:]:
    name = re.escape(pin.split("==")[0])
    text, found = re.subn(rf"^{name}==.*\n(?:    .*\n)*", "", text, flags=re.M | re.I)
    assert found == 1, f"{pin} is not in {lock}"
lock.write_text(text)
PY
    ;;
  venv)
    venv=.venv-$name
    # One build at a time per venv: a second `make dev` or a test that asks for the venv
    # while it is being built waits here, then finds the stamp, instead of deleting it.
    exec 9>"$venv.lock"
    flock 9
    stamp=$(cat "$lock" requirements/torch.txt client/pyproject.toml | sha256sum | cut -d' ' -f1)
    if [ -f "$venv/inputs.sha256" ] && [ "$(cat "$venv/inputs.sha256")" = "$stamp" ]; then
      exit 0
    fi
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install "${pip[@]}" --require-hashes --no-deps -r "$lock"
    "$venv/bin/pip" install "${pip[@]}" --no-deps --index-url "$torch_index" -r requirements/torch.txt
    # The lock holds the client's build backend (setuptools): no build isolation, nothing fetched.
    if grep -qx tribunal-client "$in"; then
      "$venv/bin/pip" install "${pip[@]}" --no-deps --no-build-isolation -e client
    fi
    echo "$stamp" >"$venv/inputs.sha256"
    ;;
  *)
    echo "usage: $0 lock|venv TRAINER" >&2
    exit 2
    ;;
esac
