"""Sandboxes: bubblewrap argv, slot uids, rlimits, and one driver process per sandbox.

One :class:`SandboxSession` is one bwrap sandbox running the trusted driver
(:func:`driver_source`: ``protocol.py`` ... ``driver.py``) as pid 1 of fresh
user, pid, net, ipc, uts, mount and cgroup namespaces, with a read-only system (only ``/usr``
and the loader's files), size-capped tmpfs for ``/box``, ``/tmp`` and ``/dev/shm``, no
network, an empty environment, every capability dropped (but ``CAP_SYS_ADMIN`` of the
sandbox's own user namespace, which the driver keeps to give each stdio case namespaces of
its own, and drops in every process it forks) and a new session. The service talks
to it over two pipes: commands on the driver's stdin and token-prefixed records on a result
pipe that only the driver holds (see ``protocol.py``).

Hard limits come from outside the sandbox: rlimits set before ``exec`` of bwrap (address
space, CPU, processes, file size, open files, no core files), the host uid of the slot
(``RLIMIT_NPROC`` counts per uid, so each concurrent slot has its own), and a wall-clock
deadline after which the whole process group is SIGKILLed (bwrap's ``--die-with-parent`` and
the pid namespace take every descendant with it). When a slot is released, any process still
owned by its uid is killed (belt and braces).

Pitfalls measured on the build machine (``shared/research/sandbox.md``) and handled
here: bwrap's pid-1 keeps bwrap's environment in ``/proc/1/environ`` (bwrap starts with an
empty environment, and ``--as-pid-1`` makes the driver pid 1); bwrap run as host root still
reads root's files (programs run as an unprivileged slot uid); bwrap's root and ``/dev`` are
uncapped tmpfs (``--remount-ro /`` and ``/dev``); ``--size`` applies to the next ``--tmpfs``;
``RLIMIT_CPU`` is per process and never fires on sleep (the wall-clock kill is the limit).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import hmac
import json
import logging
import os
import resource
import secrets
import shutil
import signal
import stat
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tribunal.code import (
    call_role,
    check_role,
    codec,
    driver,
    driver_base,
    driver_channel,
    driver_confine,
    interp_role,
    protocol,
    stdio_role,
)
from tribunal.code.cgroup import SandboxCgroup
from tribunal.code.config import CodeConfig
from tribunal.wire import jsonparse
from tribunal.wire.errors import ConfigurationError, SandboxError

if TYPE_CHECKING:
    from tribunal.code.protocol import Command, Record

logger = logging.getLogger(__name__)

_SHIPPED = (
    protocol,
    codec,
    driver_channel,
    driver_confine,
    driver_base,
    interp_role,
    stdio_role,
    call_role,
    check_role,
    driver,
)
"""The modules of the driver's unit, in order: each uses only the ones before it."""
_MAY_REPEAT = frozenset(("MYPY",))


def driver_source() -> str:
    """The driver as the one module that ships into a sandbox (which has no ``tribunal``).

    The modules of ``_SHIPPED`` (``protocol.py``, ``codec.py``, the driver's modules and
    its roles, ``driver.py`` last) concatenated, with their imports of each
    other (top-level ``from tribunal.code...``) and their ``from __future__`` lines blanked
    and one ``from __future__ import annotations`` first: the names they imported from each
    other are then the names the earlier parts defined in the same namespace.

    Raises:
        RuntimeError: Two parts define the same top-level name (the later one would silently
            replace the earlier one's in the shipped unit).
    """
    parts = ["from __future__ import annotations\n"]
    owners: dict[str, str] = {}
    for module in _SHIPPED:
        path = Path(str(module.__file__))
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        for node in ast.parse(text).body:
            if isinstance(node, ast.ImportFrom) and (
                node.module == "__future__" or str(node.module).startswith("tribunal.")
            ):
                end = node.end_lineno or node.lineno
                lines[node.lineno - 1 : end] = ["\n"] * (end - node.lineno + 1)
                continue
            for name in _defined_names(node):
                if name in owners and name not in _MAY_REPEAT:
                    raise RuntimeError(f"{name} is defined in {owners[name]} and {path.name}")
                owners[name] = path.name
        parts.append("".join(lines))
    return "\n".join(parts)


def _defined_names(node: ast.stmt) -> list[str]:
    """Top-level names a statement binds (imports of the standard library may repeat)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


DRIVER_SOURCE = driver_source()
"""The driver's unit, passed to ``python3 -I -S -c`` or precompiled (it is public; nothing
secret is in argv)."""

BOX = "/box"
_DIAGNOSTICS_BYTES = 64 * 1024
_MIB = 1024 * 1024
_EXIT_GRACE_S = 0.5
_DRIVER_PYC = "/.tribunal/driver.pyc"
_PYC_BUILDER = (
    "import sys, marshal, importlib.util\n"
    "code = compile(sys.stdin.read(), 'tribunal-driver', 'exec', dont_inherit=True)\n"
    "sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code))\n"
)


DRIVER_OOM_SCORE_ADJ = 500
"""The sandbox's ``oom_score_adj`` in a memory cgroup (the program's processes get 1000)."""


class ChannelViolation(Exception):
    """A record on the result channel did not carry the run's token (a forgery attempt)."""


@dataclass(frozen=True)
class Slot:
    """One concurrency slot and its two host uids (None: the service's own uid).

    A slot alternates between its two uids: while one runs an item, a spare sandbox is
    started ahead of time on the other (see ``runner.Runner``), and a released uid is swept
    without touching the spare.
    """

    index: int
    uids: tuple[int | None, int | None]


@dataclass(frozen=True)
class SandboxLimits:
    """Rlimits of a whole sandbox (the driver lowers them per child).

    Attributes:
        memory_mb: RLIMIT_AS of every process (MiB).
        cpu_s: RLIMIT_CPU of every process (seconds; a backstop, the wall clock rules).
        processes: RLIMIT_NPROC of the slot uid.
        file_size_mb: RLIMIT_FSIZE (MiB).
        open_files: RLIMIT_NOFILE.
    """

    memory_mb: int
    cpu_s: float
    processes: int
    file_size_mb: int
    open_files: int


@dataclass(frozen=True)
class Execution:
    """One execution of a program on one input (a stdio case, or a run).

    Attributes:
        status: ``exited``, ``signaled``, ``timeout`` (killed at the wall-clock limit) or
            ``compile_error`` (never ran).
        exit_code: Exit status, or ``128 + N`` after death by signal N (None on timeout).
        signal: The signal that ended it, if any.
        stdout: Captured stdout, at most the output cap.
        stderr: Captured stderr, at most the output cap (the compiler's for compile errors).
        stdout_truncated: More stdout was written than kept.
        stderr_truncated: More stderr was written than kept.
        time_ms: Wall-clock time from fork to exit.
        memory_killed: The kernel killed it at its sandbox's memory cgroup limit.
    """

    status: str
    exit_code: int | None
    signal: int | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    time_ms: float | None
    memory_killed: bool = False

    @classmethod
    def from_record(cls, record: Record) -> Execution:
        """Build from a stdio record of the driver (raises ``KeyError``/``ValueError``)."""
        import base64

        status = str(record["status"])
        if status == "compile_error":
            text = str(record.get("stderr", "")).encode()
            return cls(status, None, None, b"", text, False, False, None)
        sig = record.get("signal")
        exit_code = record.get("exit_code")
        if sig is not None:
            exit_code = 128 + int(sig)
        if status == "timeout":
            exit_code, sig = None, int(signal.SIGKILL)
        return cls(
            status=status,
            exit_code=exit_code,
            signal=sig,
            stdout=base64.b64decode(record["stdout"]),
            stderr=base64.b64decode(record["stderr"]),
            stdout_truncated=bool(record["stdout_truncated"]),
            stderr_truncated=bool(record["stderr_truncated"]),
            time_ms=float(record["time_ms"]),
        )


async def build_driver_pyc(python_path: str) -> bytes:
    """Compile the driver with the sandbox's own interpreter (its bytecode and magic).

    Raises:
        SandboxError: The interpreter could not compile it.
    """
    proc = await asyncio.create_subprocess_exec(
        python_path, "-I", "-S", "-c", _PYC_BUILDER,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={},
    )  # fmt: skip
    out, err = await proc.communicate(DRIVER_SOURCE.encode())
    if proc.returncode != 0 or not out:
        raise SandboxError(f"{python_path} cannot compile the driver: {err.decode()[-2000:]}")
    return out


def _root_links() -> list[str]:
    """Bind or link /lib, /lib64, /bin, /sbin as the host has them (merged /usr or not)."""
    args: list[str] = []
    for name in ("lib", "lib64", "lib32", "bin", "sbin"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


@lru_cache(maxsize=4)
def _capabilities(bwrap_path: str) -> tuple[str, ...]:
    """bwrap's capability options: none but ``CAP_SYS_ADMIN`` of the sandbox's own user
    namespace, which the driver alone keeps to give each stdio case its own pid, mount and
    IPC namespaces, and a network namespace after a case that left state in the sandbox's
    (every process it forks drops it before the program runs: see
    ``driver._CaseNamespaces``). A setuid bwrap refuses ``--cap-add`` to all but root: there
    the cases share the sandbox's namespaces (the start-up probe finds it and says so)."""
    try:
        setuid = bool(os.stat(bwrap_path).st_mode & stat.S_ISUID)
    except OSError:
        setuid = False
    return ("--cap-drop", "ALL") if setuid else ("--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN")


def bwrap_argv(
    config: CodeConfig, command: list[str], data_files: tuple[tuple[int, str], ...] = ()
) -> list[str]:
    """Return the bwrap command line that runs ``command`` as pid 1 of a fresh sandbox.

    Args:
        config: Paths and the tmpfs size.
        command: The program and its arguments inside the sandbox.
        data_files: ``(fd, path)``: read-only files created from the content of an fd.
    """
    data_args = [arg for fd, path in data_files for arg in ("--ro-bind-data", str(fd), path)]
    tmpfs = str(config.tmpfs_mb * _MIB)
    shm = str(max(1, config.tmpfs_mb // 4) * _MIB)
    return [
        config.bwrap_path,
        "--ro-bind", "/usr", "/usr",
        *_root_links(),
        "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
        "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", shm, "--tmpfs", "/dev/shm",
        "--mqueue", "/dev/mqueue",
        "--remount-ro", "/dev",
        "--size", tmpfs, "--tmpfs", "/tmp",
        "--size", tmpfs, "--tmpfs", BOX,
        "--chdir", BOX,
        "--unshare-all", "--unshare-user", "--disable-userns",
        "--die-with-parent", "--new-session",
        *_capabilities(config.bwrap_path),
        "--clearenv",
        "--setenv", "PATH", "/usr/bin:/bin",
        "--setenv", "HOME", BOX,
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "TMPDIR", "/tmp",
        "--hostname", "sandbox",
        "--as-pid-1",
        *data_args,
        "--remount-ro", "/",
        "--",
        *command,
    ]  # fmt: skip


def _preexec(uid: int | None, limits: SandboxLimits) -> None:  # pragma: no cover - in child
    """Runs in the forked child before exec of bwrap: limits first (as root), then the uid."""
    memory = limits.memory_mb * _MIB
    cpu = max(1, int(limits.cpu_s + 0.999))
    settings = [
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_CPU, cpu),
        (resource.RLIMIT_FSIZE, limits.file_size_mb * _MIB),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ]
    if uid is not None:
        # Counted per host uid: only meaningful when the slot has a uid of its own.
        settings.append((resource.RLIMIT_NPROC, limits.processes))
    for which, value in settings:
        resource.setrlimit(which, (value, value))
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")  # the sandbox dies first under memory pressure; children cannot lower it
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


_PRLIMIT = shutil.which("prlimit")
_SETPRIV = shutil.which("setpriv")


def limits_prefix(uid: int | None, limits: SandboxLimits) -> list[str] | None:
    """``prlimit ... -- setpriv ... --``: rlimits, then the slot uid, before bwrap runs.

    Exec'ing these two small util-linux tools lets ``subprocess`` use vfork: a ``preexec_fn``
    forces a full fork of the service process, which blocks the event loop for several ms
    per sandbox. Returns None when the tools are missing (``_preexec`` is used instead).
    """
    if _PRLIMIT is None or (uid is not None and _SETPRIV is None):
        return None
    cpu = max(1, int(limits.cpu_s + 0.999))
    prefix = [
        _PRLIMIT,
        f"--as={limits.memory_mb * _MIB}",
        f"--cpu={cpu}",
        f"--fsize={limits.file_size_mb * _MIB}",
        f"--nofile={limits.open_files}",
        "--core=0",
    ]
    if uid is not None:
        assert _SETPRIV is not None
        prefix += [f"--nproc={limits.processes}", "--"]
        prefix += [_SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return [*prefix, "--"]


def kill_uid(uid: int, descendants_only: bool = True) -> int:
    """SIGKILL every process owned by host ``uid`` that descends from this process (a
    sandbox of this service's), or with ``descendants_only`` False every one; return how many
    were signalled.

    Only descendants, where sandboxes have pid namespaces of their own: a uid is this pool's
    by a lock file, and a lock file is only seen by the processes that share its folder. A
    code worker in a container without a user namespace (Docker's and rootful podman's
    default) runs its sandboxes as the same host uids as a service on the host, or in another
    container, whose lock folder it cannot see: a sweep of every process of the uid killed the
    other's sandboxes mid-item (``sandbox_error``, "killed by SIGKILL", no output). A
    sandbox's own processes all descend from the service: its pid namespace ends with its pid
    1, the driver, a child of bwrap, a child of this process. Without pid namespaces
    (``TRIBUNAL_CODE_ISOLATION=none``, for development), a double-forked daemon of a program
    is init's child, not ours: every process of the uid is killed there.
    """
    killed = 0
    ours = os.getpid() if descendants_only else None
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            if ours is not None and not _descends_from(int(entry.name), ours):
                continue
            pidfd = os.pidfd_open(int(entry.name))
        except OSError:
            continue
        try:
            # The pidfd pins the process: re-check the owner, then signal that very process.
            if os.stat(f"/proc/{entry.name}").st_uid == uid:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                killed += 1
        except OSError:
            pass
        finally:
            os.close(pidfd)
    return killed


_MAX_ANCESTORS = 64
"""How far up its parents a process is followed to find this one (a sandbox is a few deep)."""


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``ancestor`` is among ``pid``'s parents, read from ``/proc`` (False where a
    parent cannot be read: the process is gone)."""
    for _ in range(_MAX_ANCESTORS):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
                pid = int(stat.read().rpartition(b")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            return False
    return False


def processes_of_uid(uid: int) -> list[int]:
    """Return the pids owned by host ``uid`` (for tests and health checks)."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
    return pids


class SlotPool:
    """A fixed set of slots; each execution holds one for its whole life.

    When the service runs as root, slot k runs as host uids ``base + 2k`` and ``base + 2k + 1``,
    where ``base`` is the first free block of ``2 * slots`` uids from ``config.uid_base`` on
    (each slot alternates between its two uids): blocks are claimed with an
    exclusive ``flock`` held for the pool's life, so several worker processes (or both code
    verifiers) on one host never share a uid, and never kill each other's sandboxes when they
    sweep a released uid. Otherwise every slot runs as the service's own uid (logged).

    Args:
        config: ``slots`` and ``uid_base``.
        lock_dir: Where the uid-block lock files live.

    Raises:
        ConfigurationError: No free uid block (more than 64 pools on one host).
    """

    MAX_BLOCKS = 64

    def __init__(self, config: CodeConfig, lock_dir: str | None = None) -> None:
        self.dedicated_uids = os.geteuid() == 0
        self._lock_fds: list[tuple[int, str]] = []
        self._free: asyncio.Queue[Slot] = asyncio.Queue()
        self.in_use = 0
        """Slots held by an execution now."""
        base: int | None = None
        if self.dedicated_uids:
            base = self._claim_block(
                config, lock_dir or os.path.join(tempfile.gettempdir(), "tribunal-code-uids")
            )
        else:
            logger.warning(
                "the code runner is not root: every slot runs as uid %d (no per-slot uids)",
                os.geteuid(),
            )
        width = 2 * config.slots
        self.uids = [] if base is None else [base + k for k in range(width)]
        for k in range(config.slots):
            uids = (None, None) if base is None else (base + 2 * k, base + 2 * k + 1)
            self._free.put_nowait(Slot(k, uids))

    def _claim_block(self, config: CodeConfig, lock_dir: str) -> int:
        """Lock every uid of the first block whose uids are all free (one lock file per uid,
        so pools of different sizes never overlap)."""
        import fcntl

        os.makedirs(lock_dir, mode=0o700, exist_ok=True)
        width = 2 * config.slots
        for block in range(self.MAX_BLOCKS):
            base = config.uid_base + block * width
            held: list[tuple[int, str]] = []
            for uid in range(base, base + width):
                path = os.path.join(lock_dir, f"{uid}.lock")
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    # The owner unlinks its files at close: a lock taken on a file that was
                    # unlinked meanwhile (not the one at the path now) holds nothing.
                    if os.fstat(fd).st_ino != os.stat(path).st_ino:
                        raise BlockingIOError
                except (BlockingIOError, FileNotFoundError):
                    os.close(fd)
                    break
                held.append((fd, path))
            # A block whose uids run processes is someone else's, whatever the lock files say
            # (a service in another container, or on the host, sees other lock files). A
            # crashed owner leaves none: bwrap dies with it, and its pid namespace with bwrap.
            locked = len(held) == width
            busy = locked and any(processes_of_uid(uid) for uid in range(base, base + width))
            if locked and not busy:
                self._lock_fds = held
                return base
            if busy:
                logger.warning(
                    "slot uids %d-%d run processes of another service (a code worker in a "
                    "container without a user namespace shares the host's uids): skipping "
                    "them; give each code worker on a host a TRIBUNAL_CODE_UID_BASE of its own",
                    base,
                    base + width - 1,
                )
            for fd, _ in held:
                os.close(fd)
        raise ConfigurationError(f"no free block of {width} slot uids from {config.uid_base}")

    def close(self) -> None:
        """Release the uid block and remove its lock files (unlinked while still locked, so
        that nobody can take a lock on a file about to disappear)."""
        for fd, path in self._lock_fds:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            os.close(fd)
        self._lock_fds = []

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Slot]:
        """Hold a slot (its holder sweeps the uid it used, see ``sweep``)."""
        slot = await self._free.get()
        self.in_use += 1
        try:
            yield slot
        finally:
            self.in_use -= 1
            self._free.put_nowait(slot)


def sweep(uid: int | None, *, confined: bool) -> None:
    """Kill whatever a released uid still runs (belt and braces after the pid namespace):
    where sandboxes are ``confined`` to pid namespaces of their own, only this process's
    descendants (see :func:`kill_uid`)."""
    if uid is not None:
        left = kill_uid(uid, descendants_only=confined)
        if left:
            logger.debug("killed %d leftover process(es) of uid %d", left, uid)


class SandboxSession:
    """One sandbox running the driver, and the two pipes to it.

    Args:
        config: The code runner's configuration.
        uid: The host uid the sandbox runs as (None: the service's own).
        limits: Rlimits of the whole sandbox.
        deadline: ``loop.time()`` after which everything still running is killed.
        driver_pyc: The driver precompiled by the sandbox's interpreter (None: from source).
        cgroup: The memory cgroup the whole sandbox runs in (None: none).
    """

    def __init__(
        self,
        config: CodeConfig,
        uid: int | None,
        limits: SandboxLimits,
        deadline: float,
        driver_pyc: bytes | None = None,
        cgroup: SandboxCgroup | None = None,
    ) -> None:
        self.config = config
        self.driver_pyc = driver_pyc
        self.cgroup = cgroup
        self._oom_kills = 0
        self.uid = uid
        self.limits = limits
        self.deadline = deadline
        self._token = secrets.token_hex(protocol.TOKEN_BYTES // 2).encode("ascii")
        self._proc: asyncio.subprocess.Process | None = None
        self._records: asyncio.StreamReader | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._drains: list[asyncio.Task[None]] = []
        self._stderr = bytearray()
        self._workdir: str | None = None

    @property
    def _record_limit(self) -> int:
        """The longest record line (a stdio case's capped stdout and stderr in base64, a
        test's relayed arguments) and the longest return value the driver may send (its JSON
        is at most the call's cap and the room for a reply's keys)."""
        return 4 * self.config.max_output_bytes + _MIB

    @property
    def pid1(self) -> bool:
        """Whether the driver is pid 1 of its own pid namespace."""
        return self.config.isolation == "bwrap"

    @property
    def box(self) -> str:
        """The program's working directory as the driver sees it."""
        return BOX if self.pid1 else (self._workdir or BOX)

    @property
    def is_alive(self) -> bool:
        """Whether the sandbox's process is still running."""
        return self._proc is not None and self._proc.returncode is None

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this sandbox for memory (its cgroup's
        limit) since the last call."""
        if self.cgroup is None:
            return False
        kills = self.cgroup.oom_kills()
        killed, self._oom_kills = kills > self._oom_kills, kills
        return killed

    def end_reason(self) -> str:
        """How the sandbox ended, for the error that says it did: its exit status, or the
        signal that killed it (bwrap reports a child killed by signal N as 128 + N), and
        whether its memory cgroup killed a process for memory. A SIGKILL with no cgroup kill
        and no output is the kernel's OOM killer of the host (the sandbox's processes have the
        highest ``oom_score_adj``) or another process: the kernel log says which."""
        code = None if self._proc is None else self._proc.returncode
        if code is None:
            return "still running"
        number = -code if code < 0 else code - 128 if code > 128 else None
        if number is None:
            reason = f"exit status {code}"
        else:
            name = signal.Signals(number).name if number in set(signal.Signals) else number
            reason = f"killed by {name}"
        if self.cgroup is not None and self.cgroup.oom_kills() > self._oom_kills:
            reason += ", its memory cgroup's OOM kill"
        return reason

    def diagnostics(self) -> str:
        """The driver's stderr so far (capped), for sandbox error messages."""
        return self._stderr.decode("utf-8", "replace")[-4000:]

    async def start(self) -> None:
        """Start the sandbox and send the token.

        Raises:
            SandboxError: bwrap or the interpreter could not be started.
        """
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()
        pass_fds = [write_fd]
        driver = ["-c", DRIVER_SOURCE]
        data_files: tuple[tuple[int, str], ...] = ()
        if self.pid1 and self.driver_pyc is not None:
            # A precompiled driver saves compiling ~40 kB of source in every sandbox.
            pyc_fd = os.memfd_create("driver.pyc", os.MFD_CLOEXEC)
            os.write(pyc_fd, self.driver_pyc)
            os.lseek(pyc_fd, 0, os.SEEK_SET)
            pass_fds.append(pyc_fd)
            data_files = ((pyc_fd, _DRIVER_PYC),)
            driver = [_DRIVER_PYC]
        command = [
            self.config.python_path, "-I", "-S", *driver, str(write_fd), "1" if self.pid1 else "0"
        ]  # fmt: skip
        cwd: str | None = None
        if self.pid1:
            argv = bwrap_argv(self.config, command, data_files)
        else:
            argv = command
            cwd = self._workdir = tempfile.mkdtemp(prefix="tribunal-code-")
            if self.uid is not None:
                os.chown(cwd, self.uid, self.uid)
        prefix = limits_prefix(self.uid, self.limits)
        preexec = None if prefix is not None else partial(_preexec, self.uid, self.limits)
        # The join runs first, as the service's uid (the cgroup's owner); without the two
        # launch tools, ``_preexec`` would drop to the slot uid before it: no cgroup then.
        joins = self.cgroup is not None and prefix is not None
        join = self.cgroup.join_prefix() if self.cgroup is not None and joins else []
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *join,
                *(prefix or []),
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={},
                cwd=cwd,
                pass_fds=pass_fds,
                start_new_session=True,
                preexec_fn=preexec,
            )
            if prefix is not None:
                # The sandbox dies first under memory pressure; its processes inherit this
                # and cannot lower it. Set before any command is sent, so before any fork.
                # In a cgroup, the driver keeps less (the OOM killer of the cgroup then picks
                # the program's processes, which the driver raises to 1000).
                adj = f"/proc/{self._proc.pid}/oom_score_adj"
                with contextlib.suppress(OSError), open(adj, "w") as f:
                    f.write(str(DRIVER_OOM_SCORE_ADJ) if joins else "1000")
        except OSError as exc:
            os.close(read_fd)
            raise SandboxError(f"cannot start the sandbox ({argv[0]}): {exc}") from exc
        finally:
            for fd in pass_fds:
                os.close(fd)
        reader = asyncio.StreamReader(limit=self._record_limit)
        pipe = os.fdopen(read_fd, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
        self._records, self._transport = reader, transport
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._drains = [
            asyncio.create_task(self._drain(self._proc.stdout, None)),
            asyncio.create_task(self._drain(self._proc.stderr, self._stderr)),
        ]
        await self._write(self._token)

    async def _drain(self, stream: asyncio.StreamReader, keep: bytearray | None) -> None:
        while chunk := await stream.read(1 << 16):
            if keep is not None and len(keep) < _DIAGNOSTICS_BYTES:
                keep += chunk[: _DIAGNOSTICS_BYTES - len(keep)]

    async def _write(self, data: bytes) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(data)
            await asyncio.wait_for(self._proc.stdin.drain(), self._remaining())
        except (TimeoutError, ConnectionError) as exc:
            raise SandboxError(f"the sandbox stopped reading commands: {exc!r}") from exc

    def _remaining(self) -> float:
        return max(0.0, self.deadline - asyncio.get_running_loop().time())

    async def send(self, command: Command) -> None:
        """Send one command (a JSON line) to the driver."""
        # ASCII: a lone surrogate in a relayed value travels as its \\u escape (UTF-8 has none).
        line = json.dumps(command, separators=(",", ":")).encode()
        await self._write(line + b"\n")

    async def send_line(self, line: bytes) -> None:
        """Send one command written already: a JSON object as ASCII, without a newline."""
        await self._write(line + b"\n")

    async def receive(self, timeout_s: float | None = None) -> Record:
        """Wait for the next record of the result channel.

        A return value's bytes, which follow their record (``value_bytes`` of
        ``protocol.CallRecord``), are read too and left unparsed in the record, as
        ``value_json``: the caller compares them (``compare.reply_matches``).

        Args:
            timeout_s: Wait at most this long (and never past the session deadline).

        Raises:
            asyncio.TimeoutError: Nothing arrived in time.
            ChannelViolation: The record did not carry the token.
            SandboxError: The driver died or wrote something unreadable.
        """
        assert self._records is not None
        wait = self._remaining() if timeout_s is None else min(timeout_s, self._remaining())
        deadline = asyncio.get_running_loop().time() + wait
        try:
            line = await asyncio.wait_for(self._records.readline(), wait)
        except (ValueError, asyncio.LimitOverrunError) as exc:
            raise SandboxError(f"oversized record from the driver: {exc}") from exc
        if not line.endswith(b"\n"):
            await self._reap_quietly()
            raise SandboxError(
                f"the sandbox driver ended without answering ({self.end_reason()}): "
                f"{self.diagnostics() or 'no output'}"
            )
        token, _, payload = line.partition(b" ")
        if not hmac.compare_digest(token, self._token):
            raise ChannelViolation("a record on the result channel was not the driver's")
        try:
            record = jsonparse.loads(payload)  # orjson where exact: about twice as fast
        except (ValueError, RecursionError) as exc:
            raise SandboxError(f"unreadable record from the driver: {exc}") from exc
        if type(record) is not dict:
            raise SandboxError("the driver sent a record that is not an object")
        if "value_bytes" in record:
            size = record.pop("value_bytes")
            record["value_json"] = await self._read_value(size, deadline)
        # Typed as the protocol declares it; its keys are still read defensively.
        return cast("Record", record)

    async def _read_value(self, size: Any, deadline: float) -> bytes:
        """The ``size`` bytes of a return value that follow its record (one write of the
        driver: they are there, or on their way, when the record is)."""
        assert self._records is not None
        if type(size) is not int or not 0 <= size <= self._record_limit:
            raise SandboxError(f"the driver announced a return value of {size!r} bytes")
        wait = max(0.0, deadline - asyncio.get_running_loop().time())
        try:
            return await asyncio.wait_for(self._records.readexactly(size), wait)
        except asyncio.IncompleteReadError as exc:
            await self._reap_quietly()
            raise SandboxError(
                f"the sandbox driver ended in the middle of a return value ({self.end_reason()})"
            ) from exc

    async def request(self, command: Command, timeout_s: float | None = None) -> Record:
        """Send one command and wait for its record."""
        await self.send(command)
        return await self.receive(timeout_s)

    async def _reap_quietly(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 1.0)

    async def close(self) -> None:
        """Kill the sandbox (every process in it) and release the pipes."""
        proc = self._proc
        if proc is not None:
            if proc.returncode is None:
                # Ask the driver to kill its sandbox's processes and exit; a driver that does
                # not within a moment is killed with everything in its pid namespace.
                with contextlib.suppress(SandboxError):
                    await self._write(b'{"op":"exit"}\n')
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(proc.wait(), _EXIT_GRACE_S)
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            for task in self._drains:
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(task, 1.0)
        if self._transport is not None:
            self._transport.close()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)

    async def __aenter__(self) -> SandboxSession:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
