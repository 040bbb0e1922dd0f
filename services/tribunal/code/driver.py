"""The in-sandbox driver (stdio, function-call and test roles).

Run inside a sandbox, as one unit with ``protocol.py`` and ``codec.py`` before it (see
``sandbox.driver_source``: ``python3 -I -S <that unit, compiled> <result_fd> <pid1>``), it is
trusted code that starts before any untrusted code and keeps the only handle on the result
channel. The messages are typed in ``protocol.py``.

Channels (all pipes, opened by the service before the sandbox starts):

* fd 0, commands: first 32 raw bytes are a per-run random token, then one JSON object per line.
* ``result_fd``, records: ``<token> <json>\\n``, a call's return value after its record as the
  bytes of its JSON (the record says how many). The driver is the only process that holds it:
  every child it forks closes it and zeroes the token (kept in one bytearray, never copied
  into a ``bytes``) before any untrusted code runs, and the driver makes itself non-dumpable,
  so neither ``/proc/1/fd``, ``/proc/1/mem`` nor ``ptrace`` reach it from its children.
* fd 1 / fd 2: the driver's own diagnostics (capped by the service; never parsed).

Roles (the first command's ``role``):

* ``stdio``: for each ``case`` command fork a fresh process (Python: a fork of this warm
  interpreter that runs the code as ``__main__``; C++: exec of the compiled binary), feed its
  stdin from a memfd, capture stdout/stderr with caps, enforce the wall-clock limit, kill every
  other process of the sandbox and wipe the writable directories; report raw bytes and status.
  Comparison happens in the service.
* ``call``: keep one worker process that loaded the solution and answers ``call`` commands
  (``target`` like ``add`` or ``Solution().twoSum``, encoded args) with encoded return values.
  The worker is restarted after a crash or timeout. Values cross as tagged JSON (never pickle),
  so an object whose ``__eq__`` always says True arrives as plain data.
* ``interp``: one long-lived interpreter that runs cells in one namespace (a code-interpreter
  session, ``interp_role.py``).
* ``test``: runs a trusted ``check(candidate)`` (HumanEval / MBPP style) in a sandbox that holds
  no untrusted code; ``candidate`` (and the entry point's name, where the test uses it) is a
  proxy whose calls the service relays to a ``call`` sandbox. The program never sees the test,
  so it can neither read expected values nor patch the assertions. Nothing else is taken from
  the program: a helper the test calls (a prompt's ``encode_cyclic``) would be the program's
  own version, handed the expected values; the test brings its own, and a name it neither
  defines nor imports makes it unusable (``bad_test``).

The driver is pid 1 of its pid namespace (``bwrap --as-pid-1``): signals from inside the
sandbox without a handler are ignored by the kernel, so the program cannot kill it.
"""

from __future__ import annotations

# Only cheap C modules at import time: the driver starts once per sandbox, and ``json``,
# ``base64``, ``signal`` and ``typing`` would pull in ``re`` and ``enum`` (about 15 ms).
# ``resource`` is loaded here rather than in each forked child, which would load it anew for
# every test case (0.3 ms of CPU each).
import _signal as signal
import binascii
import builtins
import math
import os
import resource
import select
import sys
import time

from tribunal.code.codec import (
    CodecError,
    b64encode,
    decode_value,
    encode_value,
    wire_problem,
)
from tribunal.code.interp_role import InterpRole
from tribunal.code.protocol import (
    DRIVER_CALL_STATUSES,
    MAX_MESSAGE_CHARS,
    TOKEN_BYTES,
    WORKER_REPLY_KEYS,
    describe,
    dumps,
    escape_text,
    exception_name,
    loads,
)

MYPY = False
if MYPY:  # annotations only (``from __future__ import annotations``): never imported at run time
    from collections.abc import Callable, Mapping
    from typing import Any

    from tribunal.code.protocol import (
        CallCommand,
        CallRecord,
        CallSetup,
        CaseCommand,
        DoneRecord,
        StdioSetup,
        TestCall,
        TestSetup,
        WorkerReply,
        WorkerRequest,
    )

_READ_CHUNK = 1 << 16
_MAX_COMMAND_BYTES = 256 * 1024 * 1024
_REPLY_KEYS_BYTES = 4096
"""Room in a worker's reply line for its keys, beside a value of up to the output cap."""
_WIPE_DIRS_DEFAULT: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------
# Driver plumbing
# --------------------------------------------------------------------------------------------


def _quietly(fn: Callable[..., Any], *args: Any) -> None:
    """Call ``fn(*args)``, ignoring OSError (the process or fd is already gone)."""
    try:
        fn(*args)
    except OSError:
        return


def _write_all(fd: int, parts: list[Any]) -> None:
    views = [memoryview(p) for p in parts if len(p)]
    while views:
        n = os.writev(fd, views)
        while n and views:
            if n >= len(views[0]):
                n -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][n:]
                n = 0


class _Channel:
    """The result channel: token-prefixed JSON records on a pipe only the driver holds."""

    def __init__(self, fd: int, token: bytearray) -> None:
        self.fd = fd
        self.token = token

    def send(self, record: Mapping[str, Any], value: bytes | None = None) -> None:
        """Write one record; with ``value`` (a return value's JSON), the record says how many
        bytes it has (``value_bytes``) and they follow its line, in the same write."""
        if value is not None:
            record = {**record, "value_bytes": len(value)}
        payload = dumps(record).encode()
        _write_all(self.fd, [self.token, b" ", payload, b"\n", value or b""])

    def burn(self) -> None:
        """In a forked child, before untrusted code: forget the token and close the fd."""
        for k in range(len(self.token)):
            self.token[k] = 0
        _quietly(os.close, self.fd)


class _LineReader:
    def __init__(self, fd: int, limit: int = _MAX_COMMAND_BYTES) -> None:
        self.fd = fd
        self.limit = limit
        self.buf = bytearray()

    def readline(self, deadline: float | None = None) -> bytes | None:
        """Return the next line (without newline); None on EOF; raise TimeoutError."""
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 1]
                return line
            if len(self.buf) > self.limit:
                raise OverflowError("line too long")
            if deadline is not None:
                wait = deadline - time.monotonic()
                if wait <= 0 or not select.select([self.fd], [], [], wait)[0]:
                    raise TimeoutError
            chunk = os.read(self.fd, _READ_CHUNK)
            if not chunk:
                return None
            self.buf += chunk


def _read_exact_into(fd: int, buf: bytearray) -> None:
    view = memoryview(buf)
    got = 0
    while got < len(buf):
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise EOFError("command channel closed before the token")
        got += n


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


def _set_limits(memory_mb: int | None, cpu_s: float | None) -> None:
    if memory_mb:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
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


class _CaseNamespaces:
    """A fresh pid, mount, IPC and network namespace for each stdio case, where the driver
    may make them (``CAP_SYS_ADMIN`` of the sandbox's user namespace, from bwrap's ``--cap-add``).

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
    with their namespaces (nothing to wipe). The network namespace holds what a case could
    leave behind with no process to kill: its loopback's counters (a program that sent
    datagrams to itself moved them, and the next case read them), abstract ``AF_UNIX``
    names and sockets kept alive in flight; the next case starts with a down loopback and
    none of them.
    """

    def __init__(self, dirs: list[str], modes: dict[str, int]) -> None:
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
    def open(cls, dirs: list[str], modes: dict[str, int]) -> _CaseNamespaces | None:
        """None where the driver may not make namespaces (the per-case clean-up does the
        work instead)."""
        if _SYS_CLONE is None or not _has_capability(_CAP_SYS_ADMIN):
            return None
        return cls(dirs, modes)

    def fork(self) -> int:
        """Like ``os.fork``, but the child is pid 1 of new pid, mount, IPC and network
        namespaces.

        The driver is single-threaded and the child runs only :meth:`enter` (which forks the
        program with ``os.fork``), so the raw ``clone`` skipping Python's and libc's fork
        handlers is safe here.
        """
        flags = _CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWNET | _SIGCHLD
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


# --------------------------------------------------------------------------------------------
# stdio role
# --------------------------------------------------------------------------------------------


def _run_python_main(code: Any) -> None:
    """In the child: run compiled code as ``__main__`` like ``python3 -I -S solution.py``."""
    import io

    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), "utf-8")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), "utf-8")
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), "utf-8", errors="backslashreplace", line_buffering=True
    )
    for name in ("stdin", "stdout", "stderr"):  # sys.__stdout__ & co. as in a fresh interpreter
        setattr(sys, f"__{name}__", getattr(sys, name))
    sys.argv = ["solution.py"]
    module = type(sys)("__main__")  # types.ModuleType, without importing ``types``
    module.__dict__["__file__"] = "solution.py"
    sys.modules["__main__"] = module
    status = 0
    try:
        exec(code, module.__dict__)
    except SystemExit as exc:
        status = _exit_status(exc)
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    try:
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        status = status or 120
    os._exit(status)


def _exit_status(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except BaseException:
        return 1
    return 1


class _Capture:
    """Reads one pipe into a capped buffer."""

    def __init__(self, fd: int, cap: int) -> None:
        self.fd = fd
        self.cap = cap
        self.data = bytearray()
        self.truncated = False
        self.open = True

    def pump(self) -> None:
        try:
            chunk = os.read(self.fd, _READ_CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self.open = False
            os.close(self.fd)
            return
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        self.data += chunk


class _StdioRole:
    def __init__(self, driver: _Driver, setup: StdioSetup) -> None:
        self.driver = driver
        self.language = setup["language"]
        self.wipe_dirs = [str(d) for d in setup.get("wipe_dirs", _WIPE_DIRS_DEFAULT)]
        self.modes = {path: _mode_of(path) for path in self.wipe_dirs}
        self.namespaces: _CaseNamespaces | None = None
        if driver.pid1 and setup.get("case_namespaces"):
            self.namespaces = _CaseNamespaces.open(self.wipe_dirs, self.modes)
        self.kill_on_overflow = bool(setup.get("kill_on_overflow", True))
        self.code: Any = None
        self.binary = str(setup.get("binary", "/box/main"))
        self.binary_fd: int | None = None
        self.setup_error: dict[str, Any] | None = None
        self.source = str(setup["code"])
        self.setup = setup

    def prepare(self) -> dict[str, Any]:
        if self.language == "python":
            try:
                self.code = compile(self.source, "solution.py", "exec", dont_inherit=True)
            except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
                message = describe(exc)
                self.setup_error = {"status": "compile_error", "stderr": message}
            ready = {"op": "ready", **(self.setup_error or {"status": "ok"})}
        else:
            ready = self._compile_cpp()
        return {**ready, "case_namespaces": self.namespaces is not None}

    def _compile_cpp(self) -> dict[str, Any]:
        src = os.path.join(os.path.dirname(self.binary), "main.cpp")
        with open(src, "w", encoding="utf-8") as f:
            f.write(self.source)
        argv = [*self.setup["compile_argv"], src, "-o", self.binary]

        def compiler() -> None:
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            os.execv(argv[0], argv)

        result = self.execute(
            compiler,
            b"",
            float(self.setup["compile_timeout_s"]),
            int(self.setup["compile_memory_mb"]),
            1 << 16,
            wipe=False,
        )
        os.unlink(src)
        if result["status"] == "exited" and result["exit_code"] == 0:
            # Keep the binary in a sealed memfd and delete the file: the program cannot
            # rewrite its own binary between cases, and /box is empty for every case.
            import fcntl

            self.binary_fd = os.memfd_create("main", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
            with open(self.binary, "rb") as binary:
                _write_all(self.binary_fd, [binary.read()])
            os.unlink(self.binary)
            seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
            fcntl.fcntl(self.binary_fd, fcntl.F_ADD_SEALS, seals)
        if result["status"] != "exited" or result["exit_code"] != 0:
            stderr = binascii.a2b_base64(result["stderr"]).decode("utf-8", "replace")
            if result["status"] == "timeout":
                stderr = "compilation timed out\n" + stderr
            self.setup_error = {"status": "compile_error", "stderr": stderr[-MAX_MESSAGE_CHARS:]}
            return {"op": "ready", **self.setup_error}
        return {"op": "ready", "status": "ok", "compile_ms": result["time_ms"]}

    def run_case(self, cmd: CaseCommand) -> dict[str, Any]:
        if self.setup_error is not None:
            return {"i": cmd["i"], **self.setup_error}
        stdin = str(cmd.get("stdin", "")).encode("utf-8", "surrogateescape")
        if self.language == "python":
            code = self.code

            def target() -> None:
                _run_python_main(code)

        else:
            environment = dict(os.environ)

            def target() -> None:
                for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)
                os.execve(3, ["main"], environment)

        result = self.execute(
            target,
            stdin,
            float(cmd["timeout_s"]),
            int(cmd["memory_mb"]),
            int(cmd["max_output_bytes"]),
            wipe=True,
        )
        return {"i": cmd["i"], **result}

    def execute(
        self,
        target: Callable[[], None],
        stdin: bytes,
        timeout_s: float,
        memory_mb: int,
        cap: int,
        wipe: bool,
    ) -> dict[str, Any]:
        """Fork, run ``target`` in the child with limits, capture and wait; kill the rest.

        With ``wipe`` (a test case, not the compiler) and case namespaces, the child is the
        case's init (:class:`_CaseNamespaces`) and the program its child: nothing to wipe.
        """
        stdin_fd = os.memfd_create("stdin")
        os.write(stdin_fd, stdin) if len(stdin) < (1 << 20) else _write_all(stdin_fd, [stdin])
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        namespaces = self.namespaces if wipe else None
        if namespaces is not None:
            # The previous case's init, killed when its program ended, was left to exit (and
            # its namespaces to be torn down) while the case's record went out: it is gone
            # before the next case starts, with all its processes.
            self.driver.reap(block=True)
            self.driver.exited.clear()
        status_r, status_w = os.pipe() if namespaces is not None else (-1, -1)
        start = time.monotonic()
        pid = os.fork() if namespaces is None else namespaces.fork()
        if pid == 0:  # child
            try:
                if namespaces is not None:
                    self.driver.chan.burn()
                    namespaces.enter(status_w)
                self.driver.enter_child(stdin_fd, out_w, err_w, self.binary_fd)
                _set_limits(memory_mb, timeout_s + 1)
                target()
            finally:
                os._exit(127)
        self.driver.groups.add(pid)
        for fd in (stdin_fd, out_w, err_w, status_w):
            if fd >= 0:
                os.close(fd)
        out, err = _Capture(out_r, cap), _Capture(err_r, cap)
        result = self._supervise(pid, start, timeout_s, out, err, status_r)
        if namespaces is not None:
            if self.driver.filter is None:
                _remove_ipc(sysv=False)  # keyrings belong to the uid, not to a namespace
            return result
        if wipe:
            for path in self.wipe_dirs:
                _clean_dir(path, self.modes[path])
            if self.driver.pid1 and self.driver.filter is None:
                # Its own IPC namespace: whatever is in it is the program's (with the filter,
                # the program can create no SysV object and no key).
                _remove_ipc()
        return result

    def _supervise(
        self,
        pid: int,
        start: float,
        timeout_s: float,
        out: _Capture,
        err: _Capture,
        status_fd: int = -1,
    ) -> dict[str, Any]:
        deadline = start + timeout_s
        # The case ends when the program's process is reaped: by the driver (its pidfd), or
        # by the case's init, which then reports its wait status.
        ended = os.pidfd_open(pid) if status_fd < 0 else status_fd
        poller = select.poll()
        poller.register(out.fd, select.POLLIN)
        poller.register(err.fd, select.POLLIN)
        poller.register(ended, select.POLLIN)
        captures = {out.fd: out, err.fd: err}
        wait_status: int | None = None
        timed_out = False
        end = start
        while wait_status is None:
            wait_ms = max(0, int((deadline - time.monotonic()) * 1000) + 1)
            for fd, _ in poller.poll(wait_ms):
                if fd == ended:
                    wait_status = _wait_status(pid, status_fd)
                    end = time.monotonic()
                    break
                captures[fd].pump()
                if not captures[fd].open:
                    poller.unregister(fd)
            if wait_status is None and self.kill_on_overflow and out.truncated:
                os.kill(pid, signal.SIGKILL)
            if wait_status is None and time.monotonic() >= deadline:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                wait_status = _wait_status(pid, status_fd)
                end = time.monotonic()
        os.close(ended)
        # The main process is gone: kill anything it left (daemons holding the pipes), then
        # drain what is buffered until EOF. A case's init takes its whole pid namespace with
        # it; it is reaped before the next case (see ``execute``), not here.
        if status_fd >= 0:
            _quietly(os.kill, pid, signal.SIGKILL)
        else:
            self.driver.kill_others()
        for cap in (out, err):
            while cap.open:
                cap.pump()
        exit_code, sig = _status_of(wait_status)
        return {
            "status": "timeout" if timed_out else ("signaled" if sig else "exited"),
            "exit_code": exit_code,
            "signal": sig,
            "stdout": b64encode(bytes(out.data)),
            "stderr": b64encode(bytes(err.data)),
            "stdout_truncated": out.truncated,
            "stderr_truncated": err.truncated,
            "time_ms": round((end - start) * 1000, 3),
        }


# --------------------------------------------------------------------------------------------
# call role
# --------------------------------------------------------------------------------------------


def resolve_target(namespace: dict[str, Any], target: str) -> Any:
    """Resolve ``add`` / ``Solution().twoSum`` / ``mod.Cls().f`` in a namespace.

    Each dotted part is a name, optionally followed by ``()`` (call it without arguments).
    """
    obj: Any = None
    for index, part in enumerate(target.split(".")):
        call = part.endswith("()")
        name = part[:-2] if call else part
        if not name.isidentifier():
            raise NameError(f"bad entry point {target!r}")
        if index == 0:
            if name not in namespace:
                raise NameError(f"name {name!r} is not defined by the program")
            obj = namespace[name]
        else:
            obj = getattr(obj, name)
        if call:
            obj = obj()
    return obj


def _send_line(fd: int, record: WorkerReply) -> None:
    _write_all(fd, [dumps(record).encode(), b"\n"])


def _worker_main(code: Any, requests_fd: int, replies_fd: int) -> None:
    """The worker: load the solution once, then answer call requests (untrusted from here)."""
    namespace: dict[str, Any] = {"__name__": "__solution__", "__builtins__": builtins}
    try:
        exec(code, namespace)
    except BaseException as exc:
        name = type(exc).__name__
        message = describe(exc, with_type=False)
        _send_line(replies_fd, {"i": -1, "status": "load_error", "exc": name, "msg": message})
        os._exit(1)
    _send_line(replies_fd, {"i": -1, "status": "ready"})

    def resolve(name: str) -> Any:
        value = namespace.get(name)
        return value if isinstance(value, type) else None

    reader = _LineReader(requests_fd)
    while True:
        line = reader.readline()
        if line is None:
            os._exit(0)
        request = loads(line)
        try:
            fn = resolve_target(namespace, request["target"])
            if request.get("get"):
                # The test asks what a name of the program is: callables stay here.
                if callable(fn):
                    record: WorkerReply = {"i": request["i"], "status": "callable"}
                else:
                    record = {"i": request["i"], "status": "ok", "value": encode_value(fn)}
            else:
                args = decode_value(request["args"], resolve)
                kwargs = decode_value(request["kwargs"], resolve)
                value = fn(*args, **kwargs)
                record = {"i": request["i"], "status": "ok", "value": encode_value(value)}
        except BaseException as exc:
            name = exception_name(exc)
            message = describe(exc, with_type=False)
            record = {"i": request["i"], "status": "raised", "exc": name, "msg": message}
        try:
            _send_line(replies_fd, record)
        except Exception as exc:
            name = type(exc).__name__
            fail: WorkerReply = {"i": request["i"], "status": "raised", "exc": name}
            _send_line(replies_fd, {**fail, "msg": "result is not serialisable"})


def _checked_reply(reply: dict[str, Any]) -> CallRecord | None:
    """The program's process's reply rebuilt from known keys, or None if it is malformed.

    The worker runs the program, so whatever it sends is the program's: only the statuses of
    ``protocol.WORKER_REPLY_KEYS`` pass, with their keys alone; text is escaped, values are
    checked by ``codec.wire_problem`` (a refused value becomes the driver's ``protocol``).
    """
    status = reply.get("status")
    index = reply.get("i")
    if type(status) is not str or status not in WORKER_REPLY_KEYS or type(index) is not int:
        return None
    keys = WORKER_REPLY_KEYS[status]
    clean: CallRecord = {"i": index, "status": status}
    if "exc" in keys:
        exc, msg = reply.get("exc", ""), reply.get("msg", "")
        if type(exc) is not str or type(msg) is not str:
            return None
        clean["exc"], clean["msg"] = escape_text(exc, 200), escape_text(msg)
    if "value" in keys:
        problem = wire_problem(reply.get("value"))
        if problem is not None:
            return {"i": index, "status": "protocol", "msg": f"return value refused: {problem}"}
        clean["value"] = reply["value"]
    return clean


class _CallRole:
    def __init__(self, driver: _Driver, setup: CallSetup) -> None:
        self.driver = driver
        self.setup = setup
        self.memory_mb = int(setup["memory_mb"])
        self.cpu_budget_s = float(setup["cpu_budget_s"])
        self.max_reply_bytes = int(setup["max_output_bytes"])
        self.code: Any = None
        self.failure: dict[str, Any] | None = None
        self.worker: int | None = None
        self.to_worker = -1
        self.replies: _LineReader | None = None

    def prepare(self) -> dict[str, Any]:
        try:
            self.code = compile(str(self.setup["code"]), "solution.py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
            message = describe(exc)
            self.failure = {"status": "compile_error", "msg": message}
            return {"op": "ready", **self.failure}
        return {"op": "ready", "status": "ok"}

    def ensure_worker(self, deadline: float) -> dict[str, Any] | None:
        """Start the worker if needed; return a failure record if it cannot load."""
        if self.worker is not None:
            return None
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        devnull = os.open("/dev/null", os.O_RDWR)
        pid = os.fork()
        if pid == 0:
            try:
                import fcntl

                self.driver.chan.burn()
                if not self.driver.pid1:
                    os.setpgid(0, 0)
                # Park the worker's pipes high, then give them fds 3 and 4 and drop the rest.
                high_req = fcntl.fcntl(req_r, fcntl.F_DUPFD, 100)
                high_rep = fcntl.fcntl(rep_w, fcntl.F_DUPFD, 100)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.dup2(high_req, 3)
                os.dup2(high_rep, 4)
                os.closerange(5, 65536)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                _set_limits(self.memory_mb, self.cpu_budget_s)
                self.driver.confine()
                _worker_main(self.code, 3, 4)
            finally:
                os._exit(127)
        self.driver.groups.add(pid)
        for fd in (req_r, rep_w, devnull):
            os.close(fd)
        os.set_blocking(req_w, False)
        self.worker, self.to_worker = pid, req_w
        self.replies = _LineReader(rep_r, self.max_reply_bytes + _REPLY_KEYS_BYTES)
        reply = self._receive(deadline)
        if reply.get("status") == "ready":
            return None
        self.stop_worker()
        # Loading is deterministic: a program that fails to load (exception, crash, endless
        # module-level loop) fails every call the same way, without reloading it each time.
        if reply.get("status") == "load_error":
            exc = str(reply.get("exc", ""))
            self.failure = {"status": "load_error", "exc": exc, "msg": str(reply.get("msg", ""))}
        elif reply.get("status") in ("timeout", "crashed", "output_limit"):
            self.failure = {k: v for k, v in reply.items() if k != "i"}
        else:
            # Whatever the program wrote into the driver's pipe, it is not a ready record.
            self.failure = {"status": "protocol", "msg": "the program wrote into the harness pipe"}
        return self.failure

    def stop_worker(self) -> None:
        if self.worker is not None:
            _quietly(os.kill, self.worker, signal.SIGKILL)
        self.driver.kill_others()
        if self.to_worker >= 0:
            os.close(self.to_worker)
        if self.replies is not None:
            os.close(self.replies.fd)
        self.worker, self.to_worker, self.replies = None, -1, None

    def _receive(self, deadline: float) -> CallRecord:
        assert self.replies is not None
        try:
            line = self.replies.readline(deadline)
        except TimeoutError:
            self.stop_worker()
            return {"status": "timeout"}
        except OverflowError:
            self.stop_worker()
            return {"status": "output_limit"}
        if line is None:
            return self._crashed()
        try:
            reply = loads(line)
        except (ValueError, RecursionError, MemoryError):
            reply = None
        clean = _checked_reply(reply) if type(reply) is dict else None
        if clean is None:
            self.stop_worker()
            return {"status": "protocol", "msg": "malformed reply from the program's process"}
        return clean

    def _crashed(self) -> CallRecord:
        assert self.worker is not None
        try:
            _, wait_status = os.waitpid(self.worker, 0)
        except ChildProcessError:  # reaped already, between two commands
            wait_status = self.driver.exited.pop(self.worker, 0)
        self.worker = None
        exit_code, sig = _status_of(wait_status)
        self.stop_worker()
        return {"status": "crashed", "exit_code": exit_code, "signal": sig}

    def call(self, cmd: CallCommand) -> tuple[dict[str, Any], bytes | None]:
        """One call's record, and for a return value the bytes of its JSON, which travel
        beside the record (``_Channel.send``) so that the service can compare them with the
        expected value's before it parses anything (``compare.reply_matches``)."""
        record = self._call(cmd)
        if record.get("status") != "ok":
            return record, None
        # Written here from what the checks let through, so the bytes are this encoder's
        # (compact, ASCII), whatever text the worker sent.
        value = dumps(record.pop("value")).encode()
        if len(value) > self.max_reply_bytes + _REPLY_KEYS_BYTES:
            # Rewriting can lengthen the worker's text ("1E15" is 1000000000000000.0):
            # the cap holds for what is sent.
            return {**record, "status": "output_limit"}, None
        return record, value

    def _call(self, cmd: CallCommand) -> dict[str, Any]:
        start = time.monotonic()
        deadline = start + float(cmd["timeout_s"])
        index = cmd["i"]
        if self.failure is not None:
            return {"i": index, **self.failure, "time_ms": 0.0}
        failure = self.ensure_worker(deadline)
        if failure is not None:
            return {"i": index, **failure, "time_ms": _ms(start)}
        start = time.monotonic()
        deadline = start + float(cmd["timeout_s"])
        request: WorkerRequest = {
            "i": index,
            "target": cmd["target"],
            "args": cmd["args"],
            "kwargs": cmd["kwargs"],
            "get": bool(cmd.get("get")),
        }
        data = dumps(request).encode() + b"\n"
        if not self._send(data, deadline):
            return {"i": index, "status": "timeout", "time_ms": _ms(start)}
        reply = self._receive(deadline)
        elapsed = _ms(start)
        status = reply.get("status")
        if status in ("ok", "raised") and reply.get("i") != index:
            self.stop_worker()
            return {"i": index, "status": "protocol", "msg": "reply for another call"}
        if status == "ok":
            return {"i": index, "status": "ok", "value": reply.get("value"), "time_ms": elapsed}
        if status == "callable" and cmd.get("get"):
            return {"i": index, "status": "callable", "time_ms": elapsed}
        if status == "raised":
            return {
                "i": index,
                "status": "raised",
                "exc": str(reply.get("exc", "")),
                "msg": str(reply.get("msg", "")),
                "time_ms": elapsed,
            }
        if status in DRIVER_CALL_STATUSES:
            return {**{k: v for k, v in reply.items() if k != "i"}, "i": index, "time_ms": elapsed}
        self.stop_worker()
        return {"i": index, "status": "protocol", "msg": "unexpected reply", "time_ms": elapsed}

    def _send(self, data: bytes, deadline: float) -> bool:
        view = memoryview(data)
        while view:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([], [self.to_worker], [], wait)[1]:
                self.stop_worker()
                return False
            try:
                n = os.write(self.to_worker, view)
            except BlockingIOError:
                continue
            except BrokenPipeError:
                return True  # the reply read will see the crash
            view = view[n:]
        return True


def _ms(start: float) -> float:
    return round((time.monotonic() - start) * 1000, 3)


# --------------------------------------------------------------------------------------------
# test role (trusted test code; the solution lives in another sandbox)
# --------------------------------------------------------------------------------------------


class _Abort(BaseException):
    """The solution cannot go on (timeout, crash, load failure): end the check."""


class _Undefined(BaseException):
    """The test uses a name it does not define, which is not the entry point's (a
    ``BaseException``, so that no ``except Exception`` of the test swallows it)."""


_RELAYABLE = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type)
    and issubclass(value, Exception)
    and name not in ("StopIteration", "StopAsyncIteration")
}


class _TestRole:
    def __init__(self, driver: _Driver, setup: TestSetup) -> None:
        self.driver = driver
        self.setup = setup
        self.calls = 0

    def remote_call(
        self, target: str, args: tuple[Any, ...], kwargs: dict[str, Any], get: bool = False
    ) -> Any:
        try:
            wire_args = encode_value(list(args))
            wire_kwargs = encode_value(dict(kwargs))
        except CodecError as exc:
            raise TypeError(f"argument cannot be sent to the program: {exc}") from None
        self.calls += 1
        command: TestCall = {
            "op": "call", "target": target, "args": wire_args, "kwargs": wire_kwargs, "get": get
        }  # fmt: skip
        self.driver.chan.send(command)
        line = self.driver.commands.readline()
        if line is None:
            raise _Abort("service closed the command channel")
        reply = loads(line)
        status = reply.get("status")
        if status == "ok":
            return decode_value(reply["value"], self._resolve)
        if status == "callable" and get:
            return _Proxy(self, target)
        if status == "raised":
            name = str(reply.get("exc", ""))
            cls: Any = getattr(builtins, name) if name in _RELAYABLE else RemoteError
            error = cls(reply.get("msg", ""))
            error._tribunal_remote = True
            raise error
        raise _Abort(status)

    def _resolve(self, name: str) -> Any:
        value = dict.get(self.namespace, name)
        return value if isinstance(value, type) else None

    def run(self) -> DoneRecord:
        role = self
        builtin_names = vars(builtins)
        entry = str(self.setup["entry_point"])
        entry_name = entry.split(".", 1)[0].split("(", 1)[0]

        class Namespace(dict):  # type: ignore[type-arg]
            def __missing__(self, name: str) -> Any:
                if name in builtin_names:
                    return builtin_names[name]
                if name.startswith("__"):
                    raise KeyError(name)
                if name in sys.stdlib_module_names:
                    # A module the test uses without importing it (the program imported it in
                    # the shared namespace of the original harness).
                    return __import__(name)
                if name != entry_name:
                    # Not the program's to give: its own helper would see what the test
                    # passes it, the expected values among them.
                    raise _Undefined(name)
                # The entry point by name: a function stays there (proxy), a value is copied.
                value = role.remote_call(name, (), {}, get=True)
                self[name] = value
                return value

        self.namespace: dict[str, Any] = Namespace(__name__="__test__", __builtins__=builtins)
        try:
            test_code = compile(str(self.setup["test"]), "test.py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
            message = describe(exc)
            return {"op": "done", "status": "bad_test", "msg": message}
        try:
            exec(test_code, self.namespace)
            check = dict.get(self.namespace, "check")
            if not callable(check):
                return {"op": "done", "status": "bad_test", "msg": "the test defines no check()"}
            check(_Proxy(self, entry))
        except _Abort:
            return {"op": "done", "status": "aborted", "calls": self.calls}
        except _Undefined as exc:
            message = (
                f"the test uses {exc.args[0]!r}, which it neither defines nor imports: only "
                f"the entry point ({entry_name!r}) is taken from the program; define the "
                "prompt's helpers in the test"
            )
            return {"op": "done", "status": "bad_test", "msg": message, "calls": self.calls}
        except AssertionError as exc:
            message = describe(exc, with_type=False)
            return {"op": "done", "status": "failed", "msg": message, "calls": self.calls}
        except BaseException as exc:
            remote = bool(getattr(exc, "_tribunal_remote", False))
            message = describe(exc)
            status = "remote_error" if remote else "test_error"
            return {"op": "done", "status": status, "msg": message, "calls": self.calls}
        return {"op": "done", "status": "passed", "calls": self.calls}


class RemoteError(Exception):
    """An exception raised by the program whose class has no builtin counterpart."""


class _Proxy:
    """Stands for a callable of the solution; calls travel to the solution's sandbox."""

    def __init__(self, role: _TestRole, target: str) -> None:
        self._role = role
        self._target = target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._role.remote_call(self._target, args, kwargs)

    def __repr__(self) -> str:
        return f"<solution {self._target}>"


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def main() -> None:
    """Run the driver: token, setup command, then the role's command loop."""
    result_fd = int(sys.argv[1])
    pid1 = sys.argv[2] == "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.set_inheritable(result_fd, False)
    _make_undumpable()
    token = bytearray(TOKEN_BYTES)
    _read_exact_into(0, token)
    chan = _Channel(result_fd, token)
    commands = _LineReader(0)
    driver = _Driver(chan, commands, pid1)
    first = commands.readline()
    if first is None:
        return
    setup = loads(first)
    if setup.get("seccomp"):
        driver.filter = _Filter(binascii.a2b_base64(setup["seccomp"]))
    if setup.get("program_oom_score_adj") is not None:
        driver.program_oom_score_adj = int(setup["program_oom_score_adj"])
    for path in setup.get("sys_path", ()):
        if os.path.isdir(path) and path not in sys.path:
            sys.path.append(path)
    role = setup["role"]
    if role == "test":
        _drop_capabilities()
        chan.send(_TestRole(driver, setup).run())
        return
    handler: _StdioRole | _CallRole | InterpRole = (
        _StdioRole(driver, setup)
        if role == "stdio"
        else InterpRole(driver, setup)
        if role == "interp"
        else _CallRole(driver, setup)
    )
    if not isinstance(handler, _StdioRole) or handler.namespaces is None:
        _drop_capabilities()  # only the case namespaces need them
    chan.send(handler.prepare())
    while True:
        line = commands.readline()
        if line is None:
            break
        command = loads(line)
        if command.get("op") == "exit":
            break
        driver.reap()
        if isinstance(handler, _StdioRole):
            chan.send(handler.run_case(command))
        else:
            chan.send(*handler.call(command))
    driver.kill_others()


if __name__ == "__main__":
    main()
