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
* ``setsockopt`` of ``SO_SNDBUF``/``SO_RCVBUF`` (and their ``FORCE`` forms): a local socket's
  buffers are kernel memory no rlimit counts, and no memory cgroup either (cgroups charge the
  socket memory of TCP and UDP, not of ``AF_UNIX``); raised to the host's ``wmem_max`` (4 MiB
  here) they held over 1 GiB under a 256 MiB limit. Refused, each socket keeps the host's
  default (``net.core.wmem_default``, 208 KiB).
* ``listen`` with a backlog over :data:`LISTEN_BACKLOG`: connections never accepted each hold
  a closed client's buffer, up to ``somaxconn`` (4096) of them per listening socket.
* ``bpf``, ``userfaultfd``, ``perf_event_open``, ``ptrace``, ``process_vm_readv``/``_writev``,
  ``kcmp``, ``pidfd_getfd``: kernel attack surface and reaching into other processes.
* The rest of what Docker's and podman's default profiles refuse (``CONTAINER_DEFAULTS``):
  ``modify_ldt``; file handles by name (``name_to_handle_at``/``open_by_handle_at``, which
  open files by inode past the mount namespace); the old asynchronous I/O interface
  (``io_setup``...); memory policy (``set_mempolicy``, ``mbind``, ``migrate_pages``,
  ``move_pages``); mounts, new namespaces (``unshare``, ``setns``, ``clone`` with a
  ``CLONE_NEW*`` flag) and the system's clocks, modules, swap, quotas, accounting and reboot;
  ``personality`` but for the personas Docker's profile allows (``0``, ``PER_LINUX32``,
  ``UNAME26`` and both), so ``ADDR_NO_RANDOMIZE`` or ``READ_IMPLIES_EXEC`` cannot be set for
  an ``exec``. ``clone3``, whose flags sit in memory a filter cannot read, fails with
  ``ENOSYS``, as in Docker's profile, and the C library falls back to ``clone``.

Refused calls fail with ``EPERM`` (``EAFNOSUPPORT`` for sockets, as for a family the kernel
lacks), so that a program sees an ordinary error, and its verdict is its own. Calls of a
foreign architecture (32-bit entry points) kill the process (libseccomp's default).

What a host without a memory cgroup still leaves to the kernel's memory: the default buffers
of the local sockets a case's processes may hold (the driver gives each process as many open
files as its memory limit pays for at ``driver_confine.SOCKET_BYTES`` each, so at most the
memory limit per process, and as much again in flight per uid), pipe buffers (bounded per uid
by ``fs.pipe-user-pages-soft``, 64 MiB) and page tables.
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

CONTAINER_DEFAULTS: tuple[str, ...] = (
    "modify_ldt",
    "name_to_handle_at", "open_by_handle_at",
    "io_setup", "io_submit", "io_getevents", "io_pgetevents", "io_cancel", "io_destroy",
    "set_mempolicy", "get_mempolicy", "mbind", "migrate_pages", "move_pages",
    "set_mempolicy_home_node",
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr",
    "unshare", "setns",
    "acct", "clock_adjtime", "clock_settime", "settimeofday", "syslog", "vhangup",
    "init_module", "finit_module", "delete_module", "create_module", "get_kernel_syms",
    "query_module", "kexec_load", "kexec_file_load",
    "ioperm", "iopl", "lookup_dcookie", "nfsservctl", "quotactl", "quotactl_fd", "reboot",
    "swapon", "swapoff", "sysfs", "_sysctl", "uselib", "ustat",
)  # fmt: skip
"""Refused (``EPERM``) as by Docker's and podman's default seccomp profiles (moby's
``profiles/seccomp/default.json``: calls outside its allow list, or allowed only with a
capability a sandboxed program never holds), plus the old asynchronous I/O interface,
which those profiles allow and no test program uses."""

SOCKET_CALLS: tuple[str, ...] = ("socket", "socketpair")
"""Refused (``EAFNOSUPPORT``) unless their first argument is ``AF_UNIX``."""

SOCKET_BUFFERS: tuple[int, ...] = (7, 8, 32, 33)
"""``SO_SNDBUF``, ``SO_RCVBUF``, ``SO_SNDBUFFORCE``, ``SO_RCVBUFFORCE`` (``asm-generic/socket.h``):
``setsockopt(SOL_SOCKET, ...)`` of each is refused (``EPERM``)."""

LISTEN_BACKLOG: int = 10
"""The largest ``listen`` backlog allowed (``EPERM`` above): a listening local socket keeps
up to backlog + 1 connections that were never accepted, each holding what its client sent
before closing (a buffer the client's file no longer counts); at the kernel's default
``somaxconn`` (4096), one listening socket held 4097 buffers. At 10, it holds no more than a
datagram socket's queue (``net.unix.max_dgram_qlen`` + 1, 11 in a new network namespace)."""

PERSONAS: int = 0x0020008
"""The persona bits a program may set: ``PER_LINUX32`` (``0x8``) and ``UNAME26``
(``0x20000``), the personas Docker's profile allows besides the default ``0``; a
``personality`` call with any other bit (its query, ``0xffffffff``, included) is refused."""

NAMESPACE_FLAGS: tuple[int, ...] = (
    0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
)  # fmt: skip
"""``CLONE_NEWNS``, ``NEWCGROUP``, ``NEWUTS``, ``NEWIPC``, ``NEWUSER``, ``NEWPID``, ``NEWNET``:
a ``clone`` with any of them is refused (``EPERM``)."""


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
    try:
        # A binary tree of the refused calls: every allowed call, the bulk of a program's,
        # passes in about log2(rules) comparisons instead of a scan of the whole list.
        rules.set_attr(seccomp.Attr.CTL_OPTIMIZE, 2)
    except (ValueError, RuntimeError, OSError) as exc:  # libseccomp before 2.5: a scan
        logger.info("seccomp: no binary tree here (%s)", exc)
    for name in (*REFUSED, *CONTAINER_DEFAULTS):
        try:
            rules.add_rule(refuse, name)
        except (ValueError, RuntimeError, OSError) as exc:  # a call this libseccomp lacks
            logger.warning("seccomp: cannot refuse %s here (%s)", name, exc)
    for name in SOCKET_CALLS:
        rules.add_rule(
            seccomp.ERRNO(errno.EAFNOSUPPORT), name, seccomp.Arg(0, seccomp.NE, socket.AF_UNIX)
        )
    for option in SOCKET_BUFFERS:
        rules.add_rule(
            refuse,
            "setsockopt",
            seccomp.Arg(1, seccomp.EQ, socket.SOL_SOCKET),
            seccomp.Arg(2, seccomp.EQ, option),
        )
    # The argument is an int: a negative backlog (read by the kernel as "the most") has its
    # high bits set and is refused too.
    rules.add_rule(refuse, "listen", seccomp.Arg(1, seccomp.GT, LISTEN_BACKLOG))
    # One rule per bit: libseccomp compares an argument once per rule, and rules are or-ed.
    for bit in range(32):
        if not PERSONAS >> bit & 1:
            rules.add_rule(
                refuse, "personality", seccomp.Arg(0, seccomp.MASKED_EQ, 1 << bit, 1 << bit)
            )
    for flag in NAMESPACE_FLAGS:
        rules.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    fd = os.memfd_create("seccomp-bpf", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb") as out:
            rules.export_bpf(out)
        size = os.lseek(fd, 0, os.SEEK_END)
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)
