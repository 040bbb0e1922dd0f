"""Imported first by ``DeadlinePool``'s forkserver, and only there: the forkserver ignores
SIGTERM and SIGINT (and the pool processes too, through the pool's initializer, since pebble
installs a SIGTERM handler of its own in them).

Docker, systemd and Kubernetes stop a worker with SIGTERM, often to its whole process group
(or cgroup). The worker handles it: it stops claiming and finishes or releases what it holds
(``WorkerRuntime.run``). Its pool processes must not die of the same signal meanwhile, or
every item in flight would come back as an error; the worker stops them itself when it is done
(``DeadlinePool.close``), with SIGKILL after no wait (``pebble``'s ``term_timeout`` is 0).

This module changes signal dispositions when imported; nothing else imports it.
"""

from __future__ import annotations

import signal

signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
