#!/usr/bin/env bash
# One line per missing system tool, saying how to install it. Never fails: the suite skips
# or the service refuses what it cannot do, with its own message.
command -v redis-server >/dev/null || echo "note: redis-server is not installed (apt-get install redis-server); Redis tests are skipped and 'make up' uses the embedded queue"
command -v bwrap >/dev/null || echo "note: bubblewrap is not installed (apt-get install bubblewrap); the code service refuses to run code without it"
exit 0
