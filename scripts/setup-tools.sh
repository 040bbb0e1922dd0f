#!/usr/bin/env bash
# Install the system tools `make up` and `make test` need, or stop with the one command to run.
#
# Needed: redis-server (the queue; the suite starts its own), bubblewrap (the code sandbox),
# g++ (C++ items), prometheus (the suite's monitoring test scrapes a stack with it and checks
# the alert rules with its promtool), the sandbox's Python with python3-sortedcontainers
# (LeetCode solutions import it; the sandbox runs /usr/bin/python3 -I -S with Debian's
# dist-packages on its path) python3-venv (for .venv) and libseccomp2 (compiles the code sandbox's seccomp filter). As root
# it installs what is missing with apt-get, as a user through `sudo -n` (never a password
# prompt); otherwise it prints the command and exits 1. With --browser (`make test`) it also
# needs chromium and chromium-driver: the reward inspector's tests drive the page in them.
set -euo pipefail

python=${PYTHON:-python3}
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v g++ >/dev/null || missing+=(g++)
command -v prometheus >/dev/null || missing+=(prometheus)
if [ ! -x /usr/bin/python3 ]; then
  missing+=(python3 python3-sortedcontainers)
elif ! /usr/bin/python3 -I -S -c \
  'import sys; sys.path.append("/usr/lib/python3/dist-packages"); import sortedcontainers' \
  2>/dev/null; then
  missing+=(python3-sortedcontainers)
fi
"$python" -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
compgen -G '/usr/lib/*/libseccomp.so.2' >/dev/null || compgen -G '/lib/*/libseccomp.so.2' \
  >/dev/null || missing+=(libseccomp2)
if [ "${1:-}" = --browser ]; then
  command -v chromium >/dev/null || missing+=(chromium)
  command -v chromedriver >/dev/null || missing+=(chromium-driver)
fi

[ ${#missing[@]} -eq 0 ] && exit 0

command="apt-get install -y ${missing[*]}"
if ! command -v apt-get >/dev/null; then
  echo "setup: missing ${missing[*]} (Debian package names) and there is no apt-get here;" \
    "install them with this system's package manager, then run make again" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=(env) # not an empty array: bash < 4.4 calls "${a[@]}" of one unbound under set -u
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "setup: missing system tools: ${missing[*]}. Install them, then run make again:" >&2
  echo "  sudo $command" >&2
  exit 1
fi
echo "setup: installing ${missing[*]} with apt-get"
if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
  || ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"; then
  echo "setup: apt-get failed (above); install them, then run make again:" >&2
  echo "  sudo $command" >&2
  exit 1
fi
