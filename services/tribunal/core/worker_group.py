"""``tribunal worker <service>`` as several worker processes: start them, pass the stop
signals on, and exit as they do.

A CPU-bound service runs one worker per few cores (``tribunal.core.layout``), because one
worker's own thread limits what its pool gets done. So that one command (and one container)
still runs a whole service, the command starts its ``TRIBUNAL_<NAME>_WORKERS`` members as
children, ``tribunal worker <service> --workers W --member K``, in the command's process
group (so that a SIGKILL of the group, or a terminal's Ctrl-C, reaches them too).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from types import FrameType

import typer

EXIT_REFUSED = 78
"""Exit status of a worker that refuses to start with its configuration (sysexits'
``EX_CONFIG``): ``tribunal up`` keeps the other services running."""


def member_argv(service: str, workers: int, member: int) -> list[str]:
    """The command line of member ``member`` of ``service``'s group of ``workers``."""
    cli = [sys.executable, "-m", "tribunal.cli", "worker", service]
    return [*cli, "--workers", str(workers), "--member", str(member)]


def run_worker_group(service: str, workers: int, poll_s: float = 0.2) -> int:
    """Run ``workers`` members and wait until every one has exited.

    SIGTERM and SIGINT are passed on to every member: each finishes the items it is scoring
    and gives the rest back to the queue, as a lone worker does. A member that exits on its
    own (a crash, an out-of-memory kill) stops the others, so that whatever supervises this
    command (``tribunal up``, a container's restart policy) sees it and restarts the whole.

    Args:
        service: Service name.
        workers: Members to start (at least 1).
        poll_s: How often the members are looked at, seconds.

    Returns:
        0 when the members stopped after a signal; ``EXIT_REFUSED`` when they refused to start
        (they share one configuration, so one refusal is all of theirs; member 0 says why);
        otherwise the exit status of the first member that exited on its own.
    """
    members = [subprocess.Popen(member_argv(service, workers, k)) for k in range(workers)]
    stopping = False
    status = 0

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for member in members:
            if member.poll() is None:
                member.send_signal(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        running = list(members)
        while running:
            for member in list(running):
                code = member.poll()
                if code is None:
                    continue
                running.remove(member)
                if code == EXIT_REFUSED:
                    status = EXIT_REFUSED
                elif code != 0:
                    if not stopping:
                        typer.echo(
                            f"tribunal worker {service}: a worker exited with code {code}; "
                            "stopping the others",
                            err=True,
                        )
                        stop(signal.SIGTERM, None)
                    status = status or (code if code > 0 else 128 - code)
            time.sleep(poll_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status
