"""A memory cgroup per sandbox, where the host lets this process make them.

Rlimits count each process's address space; a memory cgroup counts what they do not: pages of
SysV shared memory and ``memfd`` files (also refused by the seccomp filter), page tables, pipe
and socket buffers, the kernel's memory for a process. Each sandbox runs in a cgroup of its
own (the service moves the sandbox's first process into it before bwrap starts, so every
process of the sandbox is in it), limited to the sandbox's memory and its tmpfs, without swap.
When the program passes the limit, the kernel's OOM killer picks one of the program's
processes, never the driver: the driver runs with a low ``oom_score_adj`` and gives every
process it forks for the program the highest (see ``driver_base._Driver.confine``), so the
program's fault stays its own verdict (``memory_limit``). The program cannot see the cgroup's
files (bwrap's cgroup namespace starts at it, and cgroupfs is not mounted in the sandbox), so
its counters (peak usage, failures) carry nothing from one case to the next.

Where a cgroup can be made (detected once, :meth:`MemoryCgroups.detect`):

* **cgroup v2** where this process's cgroup is writable by it and the ``memory`` controller
  is available to it (``cgroup.controllers``): a delegated subtree (systemd's ``Delegate=yes``,
  a container with a cgroup namespace of its own and cgroupfs mounted read-write), or the root
  cgroup. cgroup v2 lets a cgroup other than the root give controllers to its children only
  while it holds no process itself, so the service first moves every process of its cgroup
  into a leaf child, ``tribunal-service``, then enables ``memory`` for the children
  (``cgroup.subtree_control``); each sandbox's cgroup is a sibling of that leaf. This is the
  layout systemd's documentation asks of a delegated unit that makes cgroups of its own
  ("Control Group APIs and Delegation", rule 2), done at start instead of by a wrapper. A
  cgroup neither marked delegated nor the root of this process's cgroup namespace is left to
  its manager.
* **cgroup v1** with the ``memory`` hierarchy mounted and this process's cgroup in it
  writable (a root service on a v1 or hybrid host).

Elsewhere (rootless podman without delegation, a CI runner's cgroup) :meth:`detect` says why
not, the sandboxes run without one, and ``/readyz`` reports ``memory_cgroup: false``.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryCgroups:
    """Where this process makes memory cgroups, or why it cannot.

    Attributes:
        version: ``2``, ``1``, or None when no cgroup can be made here.
        base: The directory of this process's own (memory) cgroup, under which each
            sandbox's cgroup is made.
        reason: Why no cgroup can be made (for the log and the docs), when ``version`` is
            None.
    """

    version: int | None
    base: str | None
    reason: str = ""

    @classmethod
    def detect(cls, proc_root: str = "/proc") -> MemoryCgroups:
        """Find this process's memory cgroup and check that a child can be made in it."""
        try:
            with open(f"{proc_root}/self/cgroup", encoding="utf-8") as f:
                lines = f.read().splitlines()
            with open(f"{proc_root}/self/mountinfo", encoding="utf-8") as f:
                mounts = f.read().splitlines()
        except OSError as exc:
            return cls(None, None, f"cannot read /proc/self/cgroup: {exc}")
        v1 = cls._v1(lines, mounts)
        if v1 is not None:
            return v1
        return cls._v2(lines, mounts)

    @classmethod
    def _v1(cls, lines: list[str], mounts: list[str]) -> MemoryCgroups | None:
        path = next(
            (
                p
                for _, ctl, p in (line.split(":", 2) for line in lines)
                if "memory" in ctl.split(",")
            ),
            None,
        )
        mount = _mount_point(mounts, "cgroup", "memory")
        if path is None or mount is None:
            return None
        return cls._checked(1, os.path.join(mount, path.lstrip("/")))

    @classmethod
    def _v2(cls, lines: list[str], mounts: list[str]) -> MemoryCgroups:
        path = next((line[3:] for line in lines if line.startswith("0::")), None)
        mount = _mount_point(mounts, "cgroup2", None)
        if path is None or mount is None:
            return cls(None, None, "no cgroup v2 hierarchy and no v1 memory hierarchy")
        own = os.path.join(mount, path.lstrip("/"))
        parent = os.path.dirname(own.rstrip("/"))
        # Another process of this service (a second worker) made the leaf already.
        if os.path.basename(own.rstrip("/")) == SERVICE_LEAF and _enabled(parent):
            return cls._checked(2, parent)
        if _enabled(own):
            return cls._checked(2, own)
        # Only a cgroup handed to this process whole is reorganised: the root of its cgroup
        # namespace (the host's root cgroup, a container's own) or one systemd marks as
        # delegated. Others belong to their manager, which moves processes itself.
        if not (path.strip("/") == "" or _marked_delegated(own)):
            return cls(
                None,
                None,
                f"cgroup v2: {own} is not delegated to this process (systemd's Delegate=yes "
                "marks a delegated cgroup; a container's own cgroup namespace is one)",
            )
        try:
            _delegate(own)
        except OSError as exc:
            return cls(
                None,
                None,
                f"cgroup v2: cannot enable the memory controller for the children of {own} "
                f"(not delegated to this process: {exc})",
            )
        return cls._checked(2, own)

    @classmethod
    def _checked(cls, version: int, base: str) -> MemoryCgroups:
        probe = os.path.join(base, f"tribunal-probe-{os.getpid()}")
        try:
            os.mkdir(probe)
            os.rmdir(probe)
        except OSError as exc:
            return cls(None, None, f"cgroup v{version}: cannot make a cgroup in {base}: {exc}")
        _remove_orphans(base)
        return cls(version, base)

    def create(self, limit_bytes: int) -> SandboxCgroup | None:
        """A cgroup for one sandbox, limited to ``limit_bytes`` of memory and no swap.

        Returns None (logged) when the kernel refuses: the sandbox then runs without one.
        """
        if self.version is None or self.base is None:
            return None
        path = os.path.join(self.base, f"tribunal-{os.getpid()}-{next(_SEQUENCE)}")
        try:
            os.mkdir(path)
            if self.version == 2:
                _write(os.path.join(path, "memory.max"), str(limit_bytes))
                _write_if_there(os.path.join(path, "memory.swap.max"), "0")
            else:
                _write(os.path.join(path, "memory.limit_in_bytes"), str(limit_bytes))
                _write_if_there(os.path.join(path, "memory.memsw.limit_in_bytes"), str(limit_bytes))
        except OSError as exc:
            logger.warning("cannot make a memory cgroup for a sandbox: %s", exc)
            with contextlib.suppress(OSError):
                os.rmdir(path)
            return None
        return SandboxCgroup(self.version, path)


_SEQUENCE = itertools.count()

SERVICE_LEAF = "tribunal-service"
"""The leaf cgroup v2 into which the service moves its cgroup's processes (see the module's
docstring); never taken for a sandbox's cgroup or an orphan."""

_MOVE_ATTEMPTS = 5


def _enabled(cgroup: str) -> bool:
    """Whether ``memory`` is enabled for the children of ``cgroup`` (v2)."""
    try:
        with open(os.path.join(cgroup, "cgroup.subtree_control"), encoding="utf-8") as f:
            return "memory" in f.read().split()
    except OSError:
        return False


def _marked_delegated(cgroup: str) -> bool:
    """Whether systemd marked ``cgroup`` delegated (``Delegate=yes``: the extended attribute
    ``trusted.delegate``, or ``user.delegate`` under a user's manager, is ``1``)."""
    for name in ("trusted.delegate", "user.delegate"):
        with contextlib.suppress(OSError):
            if os.getxattr(cgroup, name) == b"1":
                return True
    return False


def _delegate(own: str) -> None:
    """Enable ``memory`` for the children of ``own``, this process's cgroup (v2), where it
    is not yet.

    The host's root cgroup may hold processes and enable controllers; any other must hold
    none (the kernel answers ``EBUSY``): its processes, this one among them, move into the
    leaf :data:`SERVICE_LEAF` first. A process started meanwhile lands in ``own`` again, so
    the move is repeated a few times.

    Raises:
        OSError: ``memory`` is not available here (``cgroup.controllers``), or the cgroup is
            not writable by this process, or processes kept arriving.
    """
    with open(os.path.join(own, "cgroup.controllers"), encoding="utf-8") as f:
        if "memory" not in f.read().split():
            raise OSError(f"the memory controller is not available in {own}")
    try:
        _write(os.path.join(own, "cgroup.subtree_control"), "+memory")
        return
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise
    leaf = os.path.join(own, SERVICE_LEAF)
    with contextlib.suppress(FileExistsError):
        os.mkdir(leaf)
    for attempt in range(_MOVE_ATTEMPTS):
        with open(os.path.join(own, "cgroup.procs"), encoding="ascii") as f:
            pids = f.read().split()
        for pid in pids:
            # A process that exited since the read is gone from the list too.
            with contextlib.suppress(ProcessLookupError):
                _write(os.path.join(leaf, "cgroup.procs"), pid)
        try:
            _write(os.path.join(own, "cgroup.subtree_control"), "+memory")
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or attempt == _MOVE_ATTEMPTS - 1:
                raise


JOIN = ("/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"')
"""Prefix of a command that moves itself into the cgroup whose ``cgroup.procs`` follows it,
then execs the rest (``subprocess`` keeps its fast spawn; a ``preexec_fn`` would not)."""


@dataclass(frozen=True)
class SandboxCgroup:
    """One sandbox's cgroup."""

    version: int
    path: str

    def join_prefix(self) -> list[str]:
        """The command prefix that starts a process in this cgroup."""
        return [*JOIN, os.path.join(self.path, "cgroup.procs")]

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this cgroup for memory."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            with open(os.path.join(self.path, name), encoding="utf-8") as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> bool:
        """Remove the cgroup; False while a process is still in it (try again later)."""
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True


def _remove_orphans(base: str) -> None:
    """Remove the sandbox cgroups a service that is gone left behind (empty once its
    sandboxes died; one that still holds a process stays)."""
    with contextlib.suppress(OSError), os.scandir(base) as entries:
        for entry in entries:
            _, _, rest = entry.name.partition("tribunal-")
            owner = rest.partition("-")[0]
            dead = owner.isdigit() and not os.path.exists(f"/proc/{owner}")
            if entry.name.startswith("tribunal-") and dead:
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def _write_if_there(path: str, text: str) -> None:
    # memsw / swap.max exist only where the kernel accounts swap.
    with contextlib.suppress(FileNotFoundError):
        _write(path, text)


def _mount_point(mounts: list[str], fstype: str, option: str | None) -> str | None:
    """The mount point of the first ``fstype`` mount (with ``option`` among its super
    options, for cgroup v1) in ``/proc/self/mountinfo`` lines."""
    for line in mounts:
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if fields[sep + 1] != fstype:
            continue
        if option is None or option in fields[-1].split(","):
            return fields[4]
    return None
