"""The seccomp filter of the programs' processes: kernel surface no test program needs.

Built once per verifier with libseccomp (``pyseccomp``, ctypes over Debian's
``libseccomp2``) as classic BPF, and handed to the sandbox's driver, which installs it in
every process it forks for the program (after dropping its own handles, before the first
byte of untrusted code), never in itself: the driver needs ``memfd_create`` for stdin and the
sealed C++ binary, and runs no untrusted code. Filters are inherited over ``fork`` and
``exec`` and cannot be removed, and the driver sets ``no_new_privs`` first.

What each refusal stops:

* ``shmget``/``shmat``/``shmctl``, ``semget``, ``msgget``, ``memfd_create``, ``memfd_secret``:
  memory no rlimit, tmpfs cap or RSS counts (a program held 4x its memory limit in detached
  SysV segments), and state that outlives the case's processes.
* ``mq_open``: POSIX message queues (state across cases, kernel memory).
* ``io_uring_setup``/``_enter``/``_register``: a second system-call interface, the source of
  many kernel exploits; refused by container runtimes' default profiles.
* ``add_key``/``keyctl``/``request_key``: keyrings, which outlive processes.
* ``socket``/``socketpair`` outside ``AF_UNIX``: ``AF_VSOCK`` reaches the hypervisor from
  outside the network namespace; no test program needs a network socket.
* ``bpf``, ``userfaultfd``, ``perf_event_open``, ``ptrace``, ``process_vm_readv``/``_writev``,
  ``kcmp``, ``pidfd_getfd``: kernel attack surface and reaching into other processes.

Refused calls fail with ``EPERM`` (``EAFNOSUPPORT`` for sockets, as for a family the kernel
lacks), so that a program sees an ordinary error, and its verdict is its own. Calls of a
foreign architecture (32-bit entry points) kill the process (libseccomp's default).
"""

from __future__ import annotations

import errno
import logging
import os
import socket

from tribunal.wire.errors import ConfigurationError

logger = logging.getLogger(__name__)

REFUSED: tuple[str, ...] = (
    "shmget", "shmat", "shmctl", "semget", "msgget",
    "memfd_create", "memfd_secret",
    "mq_open",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "add_key", "keyctl", "request_key",
    "bpf", "userfaultfd", "perf_event_open",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
)  # fmt: skip
"""System calls refused outright (``EPERM``)."""

SOCKET_CALLS: tuple[str, ...] = ("socket", "socketpair")
"""Refused (``EAFNOSUPPORT``) unless their first argument is ``AF_UNIX``."""


def build_filter() -> bytes:
    """Compile the filter to classic BPF (``struct sock_filter`` array, native byte order).

    Raises:
        ConfigurationError: libseccomp (``libseccomp2``) cannot be loaded here.
    """
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError) as exc:
        raise ConfigurationError(
            f"the seccomp layer needs libseccomp ({exc}): install it (`apt-get install -y "
            "libseccomp2`) or set TRIBUNAL_CODE_SECCOMP=false"
        ) from exc
    refuse = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in REFUSED:
        try:
            rules.add_rule(refuse, name)
        except (ValueError, RuntimeError, OSError) as exc:  # a call this libseccomp lacks
            logger.warning("seccomp: cannot refuse %s here (%s)", name, exc)
    for name in SOCKET_CALLS:
        rules.add_rule(
            seccomp.ERRNO(errno.EAFNOSUPPORT), name, seccomp.Arg(0, seccomp.NE, socket.AF_UNIX)
        )
    fd = os.memfd_create("seccomp-bpf", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb") as out:
            rules.export_bpf(out)
        size = os.lseek(fd, 0, os.SEEK_END)
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)
