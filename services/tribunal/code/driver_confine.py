"""How the driver confines what it runs: libc calls without ``ctypes``, SysV IPC and keyring
removal, the seccomp filter, rlimits, wiping the writable directories, capabilities, the OOM
score, and each stdio case's own namespaces.

Part of the driver's unit (``sandbox.driver_source``, in the order of ``sandbox._SHIPPED``):
only cheap C modules at import time, nothing of ``tribunal`` at run time but the unit's own
names.
"""

from __future__ import annotations

import math
import os
import resource
import sys

from tribunal.code.driver_channel import _quietly, _write_all

MYPY = False
if MYPY:  # annotations only (``from __future__ import annotations``): never imported at run time
    from typing import Any


_LIBC: dict[str, Any] = {}


def _libc(name: str) -> Any:
    """The libc function ``name`` (int result, errno kept), as ``ctypes.CDLL(None,
    use_errno=True)`` would give it, built from ``_ctypes`` directly: ``import ctypes`` (with
    ``struct``, ``types`` and the class zoo) costs about 2 ms of CPU in every sandbox's
    start-up, 10% of a whole ``/v1/code/run``'s sandbox."""
    if name not in _LIBC:
        import _ctypes

        # The stubs know these only through ``ctypes`` (hence the ignores); at run time they
        # are exactly what ``ctypes`` builds from the same pieces.
        class _Int(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_int
            _type_ = "i"

        class _Function(_ctypes.CFuncPtr):  # CDLL(..., use_errno=True)._FuncPtr
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = _Int

        class _Program:  # CDLL(None): the running program and its libraries (libc)
            _handle = _ctypes.dlopen(None, _ctypes.RTLD_LOCAL)  # type: ignore[arg-type]

        _LIBC[name] = _Function((name, _Program()))  # type: ignore[arg-type]
    return _LIBC[name]


def _make_undumpable() -> None:
    """PR_SET_DUMPABLE=0: same-uid children can no longer ptrace us or open /proc/1/{mem,fd}."""
    if _libc("prctl")(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        import _ctypes

        raise OSError(_ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


# SysV IPC objects of the sandbox's IPC namespace: /proc table, remover, its arguments after
# the id (IPC_RMID is 0).
_SYSV_TABLES = (
    ("/proc/sysvipc/shm", "shmctl", (0, None)),
    ("/proc/sysvipc/sem", "semctl", (0, 0)),
    ("/proc/sysvipc/msg", "msgctl", (0, None)),
)
_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
_KEYCTL_CLEAR = 7
_KEY_SPECS = (-3, -4, -5)  # the session, user and user-session keyrings


def _remove_ipc(sysv: bool = True) -> None:
    """Remove every SysV IPC object (shared memory, semaphores, message queues) and clear the
    keyrings a program can reach: they outlive the processes that made them, so they would
    carry state from one case to the next (and hold memory no rlimit counts). Without
    ``sysv``, the keyrings only (the case's IPC namespace took its objects with it). Never
    raises."""
    for table, remover, args in _SYSV_TABLES if sysv else ():
        try:
            with open(table, "rb") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 1 and fields[1].isdigit():
                try:  # noqa: SIM105 - the driver does not import contextlib
                    _libc(remover)(int(fields[1]), *args)
                except Exception:
                    pass
    if _KEYCTL is not None:
        for spec in _KEY_SPECS:
            try:  # noqa: SIM105 - the driver does not import contextlib
                _libc("syscall")(_KEYCTL, _KEYCTL_CLEAR, spec)
            except Exception:
                pass


_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


class _Filter:
    """A seccomp filter (classic BPF from the service), ready to install in forked children.

    The ``struct sock_fprog`` and the instructions it points to are built once, in the
    driver; a child only makes two ``prctl`` calls.
    """

    def __init__(self, bpf: bytes) -> None:
        import _ctypes

        class _Char(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_char
            _type_ = "c"

        class _Instructions(_ctypes.Array):  # type: ignore[type-arg]  # c_char * len(bpf)
            _type_ = _Char
            _length_ = len(bpf)

        if not bpf or len(bpf) % 8:
            raise ValueError("malformed seccomp filter")
        self._instructions = _Instructions.from_buffer_copy(bpf)
        address = _ctypes.addressof(self._instructions)
        # struct sock_fprog { unsigned short len; struct sock_filter *filter; } (padded)
        self._program = (
            (len(bpf) // 8).to_bytes(2, sys.byteorder)
            + bytes(6)
            + address.to_bytes(8, sys.byteorder)
        )

    def install(self) -> None:
        """In a forked child: no new privileges, then the filter (for good: it is inherited
        over fork and exec and cannot be removed)."""
        prctl = _libc("prctl")
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError("prctl(PR_SET_NO_NEW_PRIVS) failed")
        if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, self._program, 0, 0) != 0:
            raise OSError("prctl(PR_SET_SECCOMP) failed")


def _read_int(path: str, default: int) -> int:
    try:
        with open(path, "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return default


# The most kernel memory one open local socket can hold: a datagram socket's queue takes
# max_dgram_qlen + 1 datagrams, each up to a sender's default buffer (senders closed after
# sending still count, and the seccomp filter keeps every buffer at the default); a listening
# socket takes as many pending connections (the filter refuses a larger backlog), each with
# a closed client's buffer; a stream socket, one buffer. Read once per sandbox: the case
# network namespaces are new, with the kernel's default queue length, as the sandbox's.
SOCKET_BYTES = (_read_int("/proc/sys/net/unix/max_dgram_qlen", 10) + 1) * _read_int(
    "/proc/sys/net/core/wmem_default", 212_992
)

MIN_OPEN_FILES = 32
"""The fewest open files a program gets, whatever its memory limit (a language runtime opens
a few; a small memory limit would otherwise leave it none)."""


def _set_limits(memory_mb: int | None, cpu_s: float | None, filtered: bool) -> None:
    if memory_mb:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if memory_mb and filtered:
        # Socket buffers are kernel memory that neither RLIMIT_AS nor (for local sockets) a
        # memory cgroup counts: a process's open files, each holding at most SOCKET_BYTES
        # (where the seccomp filter keeps buffers and backlogs at their bounds), stay
        # within its memory limit (at least MIN_OPEN_FILES files); sockets in flight are
        # bounded by the same RLIMIT_NOFILE per uid.
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        files = max(MIN_OPEN_FILES, limit // SOCKET_BYTES)
        if soft == resource.RLIM_INFINITY or files < soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    if cpu_s:
        cpu = max(1, math.ceil(cpu_s))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


def _wipe(path: str) -> None:
    """Remove everything below ``path`` (not ``path`` itself); never raises, never recurses.

    The program is dead when this runs, and everything below ``path`` is its own (same uid),
    so every directory's permissions are taken back (``0o700``) before it is entered: a
    directory the program made unreadable, or a tree deeper than the stack or than
    ``PATH_MAX``, is emptied all the same. Subdirectories are moved up to ``path`` (one rename)
    and emptied there, so at most two directory fds are open and no path grows long.
    """
    try:
        root = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        prefix = ""
        moved = 0
        pending: list[str | None] = [None]
        while pending:
            name = pending.pop()
            try:
                fd = root if name is None else os.open(name, os.O_RDONLY, dir_fd=root)
            except OSError:
                continue
            try:
                with os.scandir(fd) as scan:
                    entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in scan]
            except OSError:
                entries = []
            for entry, is_dir in entries:
                try:
                    if not is_dir:
                        os.unlink(entry, dir_fd=fd)
                        continue
                    os.chmod(entry, 0o700, dir_fd=fd)
                    if fd == root:
                        pending.append(entry)
                        continue
                    prefix = prefix or ".wipe-" + os.urandom(6).hex() + "-"
                    target = prefix + str(moved)
                    moved += 1
                    os.rename(entry, target, src_dir_fd=fd, dst_dir_fd=root)
                    pending.append(target)
                except OSError:
                    pass
            if fd != root:
                os.close(fd)
                try:  # noqa: SIM105 - the driver does not import contextlib
                    os.rmdir(str(name), dir_fd=root)
                except OSError:
                    pass
    except BaseException:
        pass
    finally:
        os.close(root)


def _clean_dir(path: str, mode: int) -> None:
    """Empty a writable directory and give it back its mode, times and no extended attributes
    (each could carry a value from one case to the next); never raises."""
    _quietly(os.chmod, path, mode)
    _wipe(path)
    try:
        for name in os.listxattr(path, follow_symlinks=False):
            os.removexattr(path, name, follow_symlinks=False)
    except OSError:
        pass
    _quietly(os.utime, path, (0, 0))


def _mode_of(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o700


_CAPABILITY_HEADER = (0x20080522).to_bytes(4, sys.byteorder) + bytes(4)  # v3, this process
_NO_CAPABILITIES = bytes(24)  # effective, permitted, inheritable: two 32-bit words each


def _drop_capabilities() -> None:
    """Empty this process's capability sets (which clears the ambient set with them), for
    good: its uid is not root in the sandbox, so neither ``exec`` nor anything else gives them
    back. Raises OSError if the kernel refuses."""
    if _libc("capset")(_CAPABILITY_HEADER, _NO_CAPABILITIES) != 0:
        import _ctypes

        raise OSError(_ctypes.get_errno(), "capset failed")


def _raise_oom_score(score: int) -> None:
    """Make this process the OOM killer's first choice. Its ``/proc`` files belong to its
    uid only while it is dumpable: it is for the one write, before any untrusted code, then
    not again (as every process the driver forks). Never raises: at worst the cgroup's OOM
    killer may pick the driver (a sandbox error)."""
    prctl = _libc("prctl")
    try:
        if prctl(4, 1, 0, 0, 0) == 0:  # PR_SET_DUMPABLE
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            try:
                os.write(fd, str(score).encode())
            finally:
                os.close(fd)
    except OSError:
        pass
    finally:
        prctl(4, 0, 0, 0, 0)


_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_SIGCHLD = 17
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
_CAP_SYS_ADMIN = 21
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MQUEUE = "/dev/mqueue"


def _has_capability(bit: int) -> bool:
    """Whether this process's effective set holds capability ``bit``."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"CapEff:"):
                    return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError):
        pass
    return False


# What a case can change in the network namespace it shares with the driver and leave
# changed once none of its processes is alive, as the namespace's /proc/net shows it. With
# the seccomp filter, AF_UNIX sockets alone: every one of the namespace is in /proc/net/unix
# while it lives (bound to an abstract name or not, kept alive in flight by a cycle of
# SCM_RIGHTS messages until the kernel's collector runs, which is when some program closes a
# socket), and so is every socket the namespace's counts of sockets count. Without the
# filter, the sockets and counters of the other families too: the devices' (the loopback),
# the protocols', TIME_WAIT connections (sockstat's "tw"), netlink sockets. Not sockstat's
# "sockets: used" (it also counts, for a moment after bwrap made the namespace, the netlink
# socket bwrap brought the loopback up with, freed after an RCU grace period) nor its fields
# that count the whole kernel's sockets (they move with the host's traffic).
_NETWORK_FILES = ("/proc/net/unix",)
_NETWORK_COUNTERS = (
    "/proc/net/sockstat",
    "/proc/net/sockstat6",
    "/proc/net/netlink",
    "/proc/net/dev",
    "/proc/net/snmp",
    "/proc/net/snmp6",
    "/proc/net/netstat",
)
_HOST_FIELDS = (b"used", b"orphan", b"alloc", b"mem")


def _network_state(filtered: bool) -> list[bytes] | None:
    """What of the driver's network namespace a case could leave behind (about 30 us of CPU
    with ``filtered``, the seccomp filter's socket families; 180 us without): equal before
    and after a case whose processes left nothing there. None where a file cannot be read
    (the state is unknown: treat it as changed)."""
    state = []
    for path in _NETWORK_FILES if filtered else _NETWORK_FILES + _NETWORK_COUNTERS:
        chunks = []
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                chunk = os.read(fd, 1 << 16)
                while chunk:
                    chunks.append(chunk)
                    chunk = os.read(fd, 1 << 16)
            finally:
                os.close(fd)
        except OSError:
            return None
        data = b"".join(chunks)
        if path.endswith("/sockstat"):
            fields = data.split()
            data = b" ".join(
                b"-" if k and fields[k - 1] in _HOST_FIELDS else field
                for k, field in enumerate(fields)
            )
        state.append(data)
    return state


class _CaseNamespaces:
    """A fresh pid, mount and IPC namespace for each stdio case, where the driver may make
    them (``CAP_SYS_ADMIN`` of the sandbox's user namespace, from bwrap's ``--cap-add``), and
    a network namespace too once :attr:`network` is set.

    The cases of one item share a sandbox; without this, the pid a case's process gets and
    the inode numbers of its files advance from case to case, and a program can answer by
    the case index. Here each case's first process is pid 1 of namespaces of its own (the
    case's *init*, a ``clone`` of the driver that holds nothing of it: a plain ``unshare``
    would move the driver's later children for good, and bwrap's ``--disable-userns`` leaves
    the driver no right to ``setns`` back). The init mounts a new ``/proc``, empty tmpfs of
    the same sizes and modes over the writable directories and the ``mqueue`` of its IPC
    namespace, then forks the program as pid 2 and reports its wait status. The program sees
    the same pids, inode numbers, directory times and IPC ids in every case; when the init
    exits, the kernel kills whatever the program left, and the mounts and IPC objects go
    with their namespaces (nothing to wipe).

    The network namespace holds what a case could leave behind with no process to kill:
    abstract ``AF_UNIX`` names and sockets kept alive in flight (and, without the seccomp
    filter, the loopback's counters, which a program that sent datagrams to itself moved).
    A new one costs about 0.9 ms of CPU per case, so with the filter the cases share the
    sandbox's, and the driver compares its state (:func:`_network_state`) before and after
    each case: from the first case that changed it, :attr:`network` is set and every later
    case starts in a network namespace of its own, with a down loopback and none of that
    state. Without the filter the state a program can leave is not all in ``/proc/net``, and
    every case gets its own from the start.
    """

    def __init__(self, dirs: list[str], modes: dict[str, int], network: bool) -> None:
        self.network = network
        """Whether each case gets a network namespace of its own (``CLONE_NEWNET``)."""
        self.mounts: list[tuple[str, bytes]] = []
        for path in dirs:
            if path == _MQUEUE:
                continue
            info = os.statvfs(path)
            size = info.f_blocks * info.f_frsize
            self.mounts.append((path, f"size={size},mode={modes[path]:o}".encode()))
        self.mqueue = _MQUEUE in dirs
        # Resolved here, once: the driver itself never calls them, and a case's init and
        # program would each build the ctypes function anew (about 50 us of CPU per case).
        _libc("mount")
        _libc("capset")

    @classmethod
    def open(cls, dirs: list[str], modes: dict[str, int], network: bool) -> _CaseNamespaces | None:
        """None where the driver may not make namespaces (the per-case clean-up does the
        work instead); ``network``: a network namespace per case from the start."""
        if _SYS_CLONE is None or not _has_capability(_CAP_SYS_ADMIN):
            return None
        return cls(dirs, modes, network)

    def fork(self) -> int:
        """Like ``os.fork``, but the child is pid 1 of new pid, mount and IPC namespaces (and
        a new network namespace if :attr:`network`).

        The driver is single-threaded and the child runs only :meth:`enter` (which forks the
        program with ``os.fork``), so the raw ``clone`` skipping Python's and libc's fork
        handlers is safe here.
        """
        flags = _CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC | _SIGCHLD
        if self.network:
            flags |= _CLONE_NEWNET
        pid = _libc("syscall")(_SYS_CLONE, flags, 0, 0, 0, 0)
        if pid < 0:
            import _ctypes

            raise OSError(_ctypes.get_errno(), "clone of a test case's namespaces failed")
        return int(pid)

    def enter(self, status_fd: int) -> None:
        """In the case's init: the mounts, then fork the program's process.

        Returns in the program's process; never returns in the init, which waits for the
        program and writes its wait status to ``status_fd`` (``E``: the set-up failed).
        """
        try:
            mount = _libc("mount")
            flags = _MS_NOSUID | _MS_NODEV
            if mount(b"proc", b"/proc", b"proc", flags | _MS_NOEXEC, None) != 0:
                raise OSError("mount /proc")
            for path, options in self.mounts:
                if mount(b"tmpfs", path.encode(), b"tmpfs", flags, options) != 0:
                    raise OSError(f"mount {path}")
                os.utime(path, (0, 0))
            if self.mqueue and mount(b"mqueue", _MQUEUE.encode(), b"mqueue", flags, None) != 0:
                raise OSError("mount mqueue")
            os.chdir(os.getcwd())  # into the new tmpfs mounted over the working directory
            pid = os.fork()
        except BaseException:
            _quietly(os.write, status_fd, b"E")
            os._exit(1)
        if pid == 0:
            return
        try:
            # Hold nothing of the case but the status pipe: the program's output ends when
            # the program and whatever it left end, so the driver can answer the case while
            # this init exits and the kernel tears its namespaces down.
            os.closerange(0, status_fd)
            os.closerange(status_fd + 1, 65536)
            _drop_capabilities()
            while True:  # the init also reaps the program's orphans
                child, wait_status = os.waitpid(-1, 0)
                if child == pid:
                    break
            _write_all(status_fd, [str(wait_status).encode()])
        finally:
            os._exit(0)
