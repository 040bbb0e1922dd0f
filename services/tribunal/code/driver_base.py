"""The driver's state shared by its roles: the channels, the process groups it started,
reaping, and confining a forked child before untrusted code runs in it.

Part of the driver's unit (``sandbox.driver_source``, in the order of ``sandbox._SHIPPED``):
only cheap C modules at import time, nothing of ``tribunal`` at run time but the unit's own
names.
"""

from __future__ import annotations

import _signal as signal
import os

from tribunal.code.driver_channel import _Channel, _LineReader, _quietly
from tribunal.code.driver_confine import _drop_capabilities, _Filter, _raise_oom_score


class _Driver:
    """State shared by the roles: channel, commands, process hygiene."""

    def __init__(self, chan: _Channel, commands: _LineReader, pid1: bool) -> None:
        self.chan = chan
        self.commands = commands
        self.pid1 = pid1
        self.groups: set[int] = set()
        self.filter: _Filter | None = None
        self.program_oom_score_adj: int | None = None
        """In a memory cgroup: the ``oom_score_adj`` of every process forked for the program
        (above the driver's, so that the cgroup's OOM killer picks the program)."""
        self.exited: dict[int, int] = {}
        """Wait statuses of children reaped by ``reap`` (a worker may exit at any moment and
        be reaped here before its role looks for it)."""

    def enter_child(
        self, stdin_fd: int, stdout_fd: int, stderr_fd: int, keep_fd: int | None = None
    ) -> None:
        """In a freshly forked child: drop every trusted handle, wire the standard fds.

        ``keep_fd`` (the sealed binary of a C++ program) ends up as fd 3, close-on-exec.
        """
        self.chan.burn()
        if not self.pid1:
            os.setpgid(0, 0)
        os.dup2(stdin_fd, 0)
        os.dup2(stdout_fd, 1)
        os.dup2(stderr_fd, 2)
        if keep_fd is not None:
            if keep_fd != 3:
                os.dup2(keep_fd, 3)
            os.set_inheritable(3, False)
        os.closerange(3 if keep_fd is None else 4, 65536)
        # Python semantics (SIGPIPE and SIGXFSZ ignored, Ctrl-C raises) for forked Python
        # children; exec'd binaries get default dispositions back (see run_case).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.confine()

    def confine(self) -> None:
        """In a forked child, last before untrusted code: no capabilities (the driver may
        hold ``CAP_SYS_ADMIN`` of the sandbox's user namespace, see ``_CaseNamespaces``),
        then the seccomp filter, if any. A child that cannot do both never runs the program
        (exit 127, said on stderr)."""
        try:
            _drop_capabilities()
        except OSError:
            _quietly(os.write, 2, b"tribunal: the capabilities could not be dropped\n")
            os._exit(127)
        if self.program_oom_score_adj is not None:
            _raise_oom_score(self.program_oom_score_adj)
        if self.filter is not None:
            try:
                self.filter.install()
            except OSError:
                _quietly(os.write, 2, b"tribunal: the seccomp filter could not be installed\n")
                os._exit(127)

    def kill_others(self) -> None:
        """SIGKILL every process of the sandbox but the driver, then reap them."""
        if self.pid1:
            _quietly(os.kill, -1, signal.SIGKILL)
        else:
            for group in self.groups:
                _quietly(os.killpg, group, signal.SIGKILL)
        self.reap(block=True)
        self.groups.clear()
        self.exited.clear()

    def reap(self, block: bool = False) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exited[pid] = status


def _wait_status(pid: int, status_fd: int) -> int:
    """The wait status of a case's program: reaped here (``status_fd`` -1), or reported by
    its case's init on ``status_fd`` (blocks until it reports or dies). An init that died
    without reporting was killed at the time or output limit, its program with it: SIGKILL.

    Raises:
        OSError: The init could not set the case's namespaces up.
    """
    if status_fd < 0:
        return os.waitpid(pid, 0)[1]
    reported = os.read(status_fd, 64)
    if reported == b"E":
        raise OSError("the namespaces of a test case could not be set up")
    return int(reported) if reported else int(signal.SIGKILL)


def _status_of(wait_status: int) -> tuple[int | None, int | None]:
    if os.WIFSIGNALED(wait_status):
        return None, os.WTERMSIG(wait_status)
    return os.waitstatus_to_exitcode(wait_status), None
