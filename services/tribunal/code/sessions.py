"""Code-interpreter sessions: long-lived sandboxed interpreters held by one worker.

A session is one sandbox (:class:`~tribunal.code.sandbox.SandboxSession`, the same bwrap
argv, rlimits, seccomp filter and memory cgroup as a run) whose driver runs the ``interp``
role (``interp_role.py``): one interpreter process, cell after cell, in one namespace. Each
session has a slot of its own (its own host uids: ``RLIMIT_NPROC``, the sweep at its end and
every file of its tmpfs are its alone), so two sessions never share a process, a file, a
namespace or an interpreter object.

Limits, each enforced here or in the sandbox (never by the program's good will):

* per call: a wall-clock limit (the driver interrupts, then kills), an output cap;
* per session: a budget of wall-clock time over all its calls (and as ``RLIMIT_CPU`` of the
  interpreter), an idle TTL, its memory (``RLIMIT_AS`` and the sandbox's cgroup);
* per worker: at most ``max_sessions``; the next one is refused with ``sessions_full``
  (retryable).

A session that ends (closed, idle past its TTL, budget spent, interpreter dead, worker
stopping) is remembered by id for a while, so a call on it says why: ``session_lost``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import secrets
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tribunal.code.cgroup import MemoryCgroups
from tribunal.code.config import CodeConfig
from tribunal.code.interp_role import INTERRUPT_GRACE_S
from tribunal.code.sandbox import (
    ChannelViolation,
    SandboxLimits,
    SandboxSession,
    Slot,
    SlotPool,
    sweep,
)
from tribunal.code.session_models import CellRequest, CellResult, SessionInfo
from tribunal.wire.errors import SandboxError, SessionLost, SessionsFull

if TYPE_CHECKING:
    from tribunal.code.protocol import CellCommand

logger = logging.getLogger(__name__)

_STARTUP_S = 10.0
_DRIVER_MEMORY_MB = 256
_ANSWER_GRACE_S = 2.0
"""Beyond a call's limit and the interrupt's grace: how long the driver may take to answer."""
_REMEMBERED = 10_000
"""Ended sessions whose end is remembered (to answer ``session_lost`` with the reason)."""


@dataclass(frozen=True)
class SessionLimits:
    """The limits of every session of a worker (``TRIBUNAL_CODE_SESSION_*``).

    Attributes:
        max_sessions: Sessions one worker holds at once; the next is refused (retryable).
        idle_ttl_s: Longest time between two calls before the session is closed (s).
        budget_s: Wall-clock time all calls of a session may take together (s).
        call_timeout_s: Wall-clock limit of a call that sets none (s).
        max_call_timeout_s: Largest wall-clock limit a call may ask for (s).
        memory_mb: Address space of the interpreter (MiB).
        max_output_bytes: Largest stdout (and stderr) a call returns, bytes.
    """

    max_sessions: int = 8
    idle_ttl_s: float = 300.0
    budget_s: float = 600.0
    call_timeout_s: float = 10.0
    max_call_timeout_s: float = 60.0
    memory_mb: int = 1024
    max_output_bytes: int = 1 << 20


class InterpreterSession:
    """One sandboxed interpreter and its bookkeeping (made by :class:`SessionHost`)."""

    def __init__(
        self,
        session_id: str,
        sandbox: SandboxSession,
        slot: Slot,
        idle_ttl_s: float,
        budget_s: float,
    ) -> None:
        self.session_id = session_id
        self.sandbox = sandbox
        self.slot = slot
        self.idle_ttl_s = idle_ttl_s
        self.budget_s = budget_s
        self.used_s = 0.0
        self.last_used = time.monotonic()
        self.lock = asyncio.Lock()

    @property
    def budget_left_s(self) -> float:
        """Time left of the budget (s)."""
        return max(0.0, self.budget_s - self.used_s)

    def idle_for(self, now: float) -> float:
        """Seconds since its last call ended (0 while a call runs)."""
        return 0.0 if self.lock.locked() else now - self.last_used


class SessionHost:
    """The sessions of one worker: create, run a cell, close, expire.

    Args:
        config: The code runner's configuration (sandbox paths, rlimits, seccomp).
        limits: Session limits.
        driver_pyc: The driver precompiled by the sandbox's interpreter (None: from source).
        seccomp_filter: Classic BPF the driver installs in the interpreter, or None.
        lock_dir: Where the uid-block lock files live (tests; default the system's).

    Raises:
        ConfigurationError: No free uid block for ``max_sessions`` slots.
    """

    def __init__(
        self,
        config: CodeConfig,
        limits: SessionLimits,
        driver_pyc: bytes | None = None,
        seccomp_filter: bytes | None = None,
        lock_dir: str | None = None,
    ) -> None:
        self.config = config.model_copy(update={"slots": max(1, limits.max_sessions)})
        self.limits = limits
        self.owner = uuid.uuid4().hex[:16]
        """This host's name in its sessions' ids (and its stream's, see ``session_route``)."""
        self.pool = SlotPool(self.config, lock_dir)
        self.cgroups = MemoryCgroups.detect() if config.isolation == "bwrap" else None
        self.driver_pyc = driver_pyc
        self._seccomp = (
            None if seccomp_filter is None else base64.b64encode(seccomp_filter).decode()
        )
        self.sessions: dict[str, InterpreterSession] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._starting = 0
        self._slots: dict[str, contextlib.AsyncExitStack] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def utilisation(self) -> tuple[int, int]:
        """``(sessions held, max_sessions)``."""
        return len(self.sessions) + self._starting, self.limits.max_sessions

    async def create(
        self, idle_ttl_s: float | None = None, budget_s: float | None = None
    ) -> SessionInfo:
        """Start a session; each limit at most the host's.

        Raises:
            SessionsFull: ``max_sessions`` are held (retryable).
            SandboxError: The sandbox could not start.
        """
        held, cap = self.utilisation()
        if held >= cap:
            raise SessionsFull(
                f"this worker holds its {cap} sessions (TRIBUNAL_CODE_MAX_SESSIONS); retry "
                "later or close a session",
                retry_after_s=1.0,
            )
        ttl = min(idle_ttl_s or self.limits.idle_ttl_s, self.limits.idle_ttl_s)
        budget = min(budget_s or self.limits.budget_s, self.limits.budget_s)
        session_id = f"{self.owner}.{secrets.token_urlsafe(18)}"
        self._starting += 1
        stack = contextlib.AsyncExitStack()
        try:
            slot = await stack.enter_async_context(self.pool.acquire())
            sandbox = await self._start_sandbox(slot, budget)
        except BaseException:
            await stack.aclose()
            raise
        finally:
            self._starting -= 1
        self.sessions[session_id] = InterpreterSession(session_id, sandbox, slot, ttl, budget)
        self._slots[session_id] = stack
        return SessionInfo(
            session_id=session_id,
            idle_ttl_s=ttl,
            budget_s=budget,
            call_timeout_s=min(self.limits.call_timeout_s, budget),
            max_call_timeout_s=self.limits.max_call_timeout_s,
        )

    async def _start_sandbox(self, slot: Slot, budget_s: float) -> SandboxSession:
        uid = slot.uids[0]
        sandbox_limits = SandboxLimits(
            memory_mb=self.limits.memory_mb + _DRIVER_MEMORY_MB,
            cpu_s=budget_s + _STARTUP_S,
            processes=self.config.max_processes,
            file_size_mb=self.config.max_file_size_mb,
            open_files=self.config.max_open_files,
        )
        cgroup = None
        if self.cgroups is not None:
            tmpfs = 2 * self.config.tmpfs_mb + max(1, self.config.tmpfs_mb // 4)
            cgroup = self.cgroups.create((sandbox_limits.memory_mb + tmpfs) * 1024 * 1024)
        deadline = asyncio.get_running_loop().time() + _STARTUP_S
        sandbox = SandboxSession(
            self.config, uid, sandbox_limits, deadline, self.driver_pyc, cgroup
        )
        try:
            await sandbox.start()
            ready = await sandbox.request(
                {
                    "role": "interp",
                    "seccomp": self._seccomp,
                    "sys_path": list(self.config.python_paths),
                    "program_oom_score_adj": 1000 if cgroup is not None else None,
                    "memory_mb": self.limits.memory_mb,
                    "cpu_budget_s": budget_s,
                    "max_output_bytes": self.limits.max_output_bytes,
                },
                _STARTUP_S,
            )
            if ready.get("op") != "ready" or ready.get("status") != "ok":
                raise SandboxError(f"the interpreter did not start: {sandbox.diagnostics()}")
        except TimeoutError as exc:
            await _teardown(sandbox, uid)
            raise SandboxError(f"the interpreter did not start: {sandbox.diagnostics()}") from exc
        except BaseException:
            await _teardown(sandbox, uid)
            raise
        return sandbox

    def _lost(self, session_id: str) -> SessionLost:
        reason = self._ended.get(session_id)
        if reason is None:
            return SessionLost(
                f"no session {session_id!r} on this worker (never started here, or ended long ago)",
                field="session_id",
            )
        return SessionLost(f"session {session_id!r} ended: {reason}", field="session_id")

    async def run(self, session_id: str, request: CellRequest) -> CellResult:
        """Run one cell in the session.

        Raises:
            SessionLost: The session is not held here (ended, or never was).
            SandboxError: The sandbox failed (not the program); the session is ended.
        """
        session = self.sessions.get(session_id)
        if session is None:
            raise self._lost(session_id)
        async with session.lock:
            if session_id not in self.sessions:
                raise self._lost(session_id)
            if session.budget_left_s <= 0:
                self._end(session, f"its time budget of {session.budget_s:g} s is spent")
                raise self._lost(session_id)
            try:
                result = await self._cell(session, request)
            finally:
                session.last_used = time.monotonic()
        if not result.session_alive:
            self._end(session, _death(result))
        return result

    async def _cell(self, session: InterpreterSession, request: CellRequest) -> CellResult:
        limits = self.limits
        timeout = min(
            request.timeout_s or limits.call_timeout_s,
            limits.max_call_timeout_s,
            session.budget_left_s,
        )
        cap = min(request.max_output_bytes or limits.max_output_bytes, limits.max_output_bytes)
        wait = timeout + INTERRUPT_GRACE_S + _ANSWER_GRACE_S
        sandbox = session.sandbox
        sandbox.deadline = asyncio.get_running_loop().time() + wait
        command: CellCommand = {
            "op": "cell",
            "code": request.code,
            "timeout_s": timeout,
            "max_output_bytes": cap,
        }
        started = time.monotonic()
        try:
            record = await sandbox.request(command, wait)
        except (TimeoutError, ChannelViolation, SandboxError) as exc:
            session.used_s += time.monotonic() - started
            self._end(session, f"its sandbox failed ({exc!r})")
            raise SandboxError(
                f"the session's sandbox failed: {exc!r}; the session is ended"
            ) from exc
        session.used_s += time.monotonic() - started
        crashed = record.get("status") == "crashed" and record.get("signal") == 9
        if crashed and sandbox.oom_killed():
            record["stderr"] = base64.b64encode(
                base64.b64decode(record["stderr"]) + b"\nkilled at the session's memory limit\n"
            ).decode()
        return CellResult(
            status=record["status"],
            stdout=base64.b64decode(record["stdout"]).decode("utf-8", "replace"),
            stderr=base64.b64decode(record["stderr"]).decode("utf-8", "replace"),
            stdout_truncated=bool(record["stdout_truncated"]),
            stderr_truncated=bool(record["stderr_truncated"]),
            display=record.get("display"),
            error=record.get("error"),
            time_ms=float(record["time_ms"]),
            session_alive=bool(record["alive"]),
            budget_left_s=round(session.budget_left_s, 3),
            exit_code=record.get("exit_code"),
            signal=record.get("signal"),
        )

    async def close(self, session_id: str) -> None:
        """Close a session (its sandbox killed, its uid swept).

        Raises:
            SessionLost: It is not held here.
        """
        session = self.sessions.get(session_id)
        if session is None:
            raise self._lost(session_id)
        self._end(session, "it was closed")

    def _end(self, session: InterpreterSession, reason: str) -> None:
        """Forget the session (remembering why) and tear it down in the background."""
        if self.sessions.pop(session.session_id, None) is None:
            return
        self._ended[session.session_id] = reason
        while len(self._ended) > _REMEMBERED:
            self._ended.popitem(last=False)
        logger.info("session %s ended: %s", session.session_id, reason)
        stack = self._slots.pop(session.session_id)
        task = asyncio.create_task(self._close_later(session, stack))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close_later(
        self, session: InterpreterSession, stack: contextlib.AsyncExitStack
    ) -> None:
        async with session.lock:  # a call in flight (an expired TTL never races one) ends first
            await _teardown(session.sandbox, session.slot.uids[0])
        await stack.aclose()

    def expire(self, now: float | None = None) -> int:
        """End the sessions idle past their TTL; return how many."""
        now = time.monotonic() if now is None else now
        idle = [s for s in self.sessions.values() if s.idle_for(now) > s.idle_ttl_s]
        for session in idle:
            self._end(session, f"it was idle for more than its TTL of {session.idle_ttl_s:g} s")
        return len(idle)

    async def expire_forever(self, period_s: float = 1.0) -> None:
        """Call :meth:`expire` every ``period_s`` until cancelled."""
        while True:
            await asyncio.sleep(period_s)
            self.expire()

    async def aclose(self) -> None:
        """End every session and release the uid block."""
        for session in list(self.sessions.values()):
            self._end(session, "its worker stopped")
        while self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)
        self.pool.close()


def _death(result: CellResult) -> str:
    if result.status == "timeout":
        return "its interpreter did not stop when interrupted at its time limit and was killed"
    how = f"signal {result.signal}" if result.signal is not None else f"exit {result.exit_code}"
    return f"its interpreter died ({how})"


async def _teardown(sandbox: SandboxSession, uid: int | None) -> None:
    """Kill a sandbox, sweep its uid and remove its cgroup."""
    await sandbox.close()
    sweep(uid, confined=sandbox.pid1)
    if sandbox.cgroup is None:
        return
    for _ in range(50):
        if sandbox.cgroup.remove():
            return
        await asyncio.sleep(0.02)
    logger.warning("the memory cgroup %s is still busy; left in place", sandbox.cgroup.path)
