"""Run one item's tests in sandboxes and turn what happened into per-case verdicts.

* stdio: one sandbox per item; the driver forks a fresh process per case.
* function: one sandbox per item; one warm worker answers every call (restarted after a
  crash or timeout); return values are compared here (``compare.py``).
* assert: two sandboxes per item, on the same slot: the program's (``call`` role) and the
  test's (``test`` role, no untrusted code in it). Every call the test makes of the program is
  relayed here as JSON, so the program never sees the test and cannot touch its assertions.
* run: a stdio execution of one input whose output is returned, not compared.

The cases of a stdio or function item run in a random order drawn here for each item and
never sent into the sandbox: the driver, and the program, see only the position of a case in
that order (``i``). A program that tells its cases apart by anything that changes from one to
the next (a counter of its own, the driver's frames it inherits, a number the whole host
advances) learns that position, which names no case: answering by it is paid for about one
case of an item, by chance, however many there are.

Faults of the program are verdicts; faults of Tribunal or the sandbox raise ``SandboxError``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import random
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tribunal.code.cgroup import MemoryCgroups
from tribunal.code.codec import encode_value
from tribunal.code.compare import reply_matches, stdout_matches
from tribunal.code.config import CXX_FLAGS, CodeConfig
from tribunal.code.protocol import escape_text
from tribunal.code.sandbox import (
    ChannelViolation,
    Execution,
    SandboxLimits,
    SandboxSession,
    SlotPool,
    sweep,
)
from tribunal.core.offload import off_loop_if_large
from tribunal.wire.code import (
    AssertTests,
    CodeItem,
    FunctionTests,
    Limits,
    RunItem,
    StdioTests,
)
from tribunal.wire.code_verdicts import TestVerdict
from tribunal.wire.errors import BadInput, SandboxError

if TYPE_CHECKING:
    from tribunal.code.protocol import (
        CallCommand,
        CallSetup,
        CaseCommand,
        Record,
        StdioSetup,
        TestSetup,
    )

logger = logging.getLogger(__name__)

_GRACE_S = 2.0
"""Slack on top of a case's own limit before the service stops waiting for the driver."""
_STARTUP_S = 10.0
_PROGRAM_OOM_SCORE_ADJ = 1000
_CGROUP_KILL = "killed by the sandbox's memory limit (its cgroup counts all memory)"
_DRIVER_MEMORY_MB = 256
_MESSAGE_CHARS = 1000
_RUNTIME_ERROR_SIGNALS = {int(signal.SIGSEGV): "segmentation fault", int(signal.SIGABRT): "aborted"}


@dataclass(frozen=True)
class CaseLimits:
    """Limits of every case of one item, after clamping to the server's maxima."""

    timeout_s: float
    memory_mb: int
    max_output_bytes: int


def effective_limits(limits: Limits | None, config: CodeConfig) -> CaseLimits:
    """Apply defaults and clamp an item's limits to the server's maxima."""
    limits = limits or Limits()
    return CaseLimits(
        timeout_s=min(limits.timeout_s or config.default_timeout_s, config.max_timeout_s),
        memory_mb=min(limits.memory_mb or config.default_memory_mb, config.max_memory_mb),
        max_output_bytes=min(
            limits.max_output_bytes or config.default_max_output_bytes, config.max_output_bytes
        ),
    )


@dataclass(frozen=True)
class CaseResult:
    """The verdict of one case, its time and why it failed; for a failed stdio case, the
    start of what the program wrote (``stdout``, ``stderr``: at most ``OUTPUT_EXCERPT_CHARS``
    characters each, escaped; None where nothing was written or the case passed)."""

    verdict: TestVerdict
    time_ms: float | None = None
    message: str | None = None
    stdout: str | None = None
    stderr: str | None = None


@dataclass
class Lease:
    """A held slot: the uid this item runs as, and the spare sandbox already started on it."""

    uid: int | None
    spare: SandboxSession | None = None
    used: list[SandboxSession] = field(default_factory=list)


@dataclass(frozen=True)
class ItemRun:
    """Everything the scorer needs about one scored item."""

    cases: list[CaseResult]
    compile_message: str | None = None


def _cap(text: str | None) -> str | None:
    return None if text is None else escape_text(text, _MESSAGE_CHARS)


OUTPUT_EXCERPT_CHARS = 256
"""What a failed stdio case's result keeps of each output stream: enough to see what a
program printed instead of the answer (the reward inspector shows it), small enough that an
item of a hundred failed cases stays a few tens of kilobytes."""


def _excerpt(data: bytes) -> str | None:
    if not data:
        return None
    return escape_text(
        data[: OUTPUT_EXCERPT_CHARS * 4].decode("utf-8", "replace"), OUTPUT_EXCERPT_CHARS
    )


def _stderr_tail(data: bytes) -> str:
    return data.decode("utf-8", "replace")[-_MESSAGE_CHARS:]


def _is_memory_error(stderr: bytes) -> bool:
    lines = stderr.rstrip().splitlines()
    last = lines[-1] if lines else b""
    return last.startswith(b"MemoryError") or b"std::bad_alloc" in stderr[-4096:]


def classify_execution(
    execution: Execution, truncation_fails: bool = True
) -> tuple[TestVerdict | None, str | None]:
    """Verdict of an execution that did not exit cleanly; ``(None, None)`` if it exited 0.

    With ``truncation_fails`` (scoring), output truncation also fails: a program may not be
    judged on part of its output. Runs return the truncated output with a flag instead.
    """
    if execution.status == "compile_error":
        return TestVerdict.COMPILE_ERROR, _stderr_tail(execution.stderr)
    if execution.status == "timeout":
        return TestVerdict.TIME_LIMIT, None
    if execution.memory_killed:
        return TestVerdict.MEMORY_LIMIT, _CGROUP_KILL
    if execution.signal is not None:
        if execution.stdout_truncated:
            return TestVerdict.WRONG_ANSWER, "output limit exceeded"
        if execution.signal in (int(signal.SIGXCPU), int(signal.SIGKILL)):
            return TestVerdict.TIME_LIMIT, f"killed by signal {execution.signal} (CPU limit)"
        if _is_memory_error(execution.stderr):
            return TestVerdict.MEMORY_LIMIT, _stderr_tail(execution.stderr)
        name = _RUNTIME_ERROR_SIGNALS.get(execution.signal, f"signal {execution.signal}")
        return TestVerdict.RUNTIME_ERROR, f"killed by {name}"
    if execution.exit_code != 0:
        if _is_memory_error(execution.stderr):
            return TestVerdict.MEMORY_LIMIT, _stderr_tail(execution.stderr)
        return TestVerdict.RUNTIME_ERROR, (
            f"exit status {execution.exit_code}\n{_stderr_tail(execution.stderr)}"
        )
    if execution.stdout_truncated and truncation_fails:
        return TestVerdict.WRONG_ANSWER, "output limit exceeded"
    return None, None


def classify_call(record: Record) -> tuple[TestVerdict, str | None]:
    """Verdict of a call that did not return a value (status other than ``ok``)."""
    status = record.get("status")
    exc = str(record.get("exc", ""))
    message = _cap(f"{exc}: {record.get('msg', '')}" if exc else record.get("msg"))
    if status == "compile_error":
        return TestVerdict.COMPILE_ERROR, message
    if status == "timeout":
        return TestVerdict.TIME_LIMIT, None
    if status in ("raised", "load_error"):
        if exc == "MemoryError":
            return TestVerdict.MEMORY_LIMIT, message
        return TestVerdict.RUNTIME_ERROR, message
    if status == "crashed":
        sig = record.get("signal")
        if sig is not None:
            if sig in (int(signal.SIGXCPU), int(signal.SIGKILL)):
                return TestVerdict.TIME_LIMIT, f"killed by signal {sig} (CPU limit)"
            return TestVerdict.RUNTIME_ERROR, f"killed by signal {sig}"
        return TestVerdict.RUNTIME_ERROR, f"the program exited (status {record.get('exit_code')})"
    if status == "output_limit":
        return TestVerdict.RUNTIME_ERROR, "return value larger than the output limit"
    return TestVerdict.RUNTIME_ERROR, _cap(f"invalid result: {message or status}")


class Runner:
    """Runs items in sandboxes drawn from a slot pool.

    Sandboxes are started ahead of time: while a slot runs an item as one of its two uids, a
    spare sandbox (driver up, waiting for its setup) is started on the other, so the next item
    on that slot skips bwrap's and Python's start-up (about 15 ms). A sandbox's own rlimits are
    the server maxima; the driver lowers them for each process it forks to the item's limits.

    Args:
        config: The code runner's configuration.
        pool: Slots (and their uids) shared by every item of this runner.
        driver_pyc: The driver precompiled by the sandbox's interpreter (None: from source).
        prewarm: Keep a spare sandbox per slot.
        seccomp_filter: Classic BPF the driver installs in every process of the program
            (``seccomp.build_filter``), or None for none.
    """

    def __init__(
        self,
        config: CodeConfig,
        pool: SlotPool,
        driver_pyc: bytes | None = None,
        prewarm: bool = True,
        seccomp_filter: bytes | None = None,
    ) -> None:
        self.config = config
        self.pool = pool
        self.case_namespaces = config.case_namespaces
        """Ask the driver for namespaces of its own per stdio case (the verifier's start-up
        probe turns this off where the host refuses them)."""
        self.cgroups = MemoryCgroups.detect() if config.isolation == "bwrap" else None
        """Where each sandbox's memory cgroup is made (``version`` None: nowhere here)."""
        self.driver_pyc = driver_pyc
        self._seccomp = (
            None if seccomp_filter is None else base64.b64encode(seccomp_filter).decode("ascii")
        )
        self.prewarm = prewarm
        self._spares: dict[int, tuple[int | None, asyncio.Task[SandboxSession | None]]] = {}
        self._cleanups: dict[tuple[int, int | None], asyncio.Task[None]] = {}

    async def aclose(self) -> None:
        """Stop the spare sandboxes and finish every pending clean-up."""
        spares, self._spares = self._spares, {}
        for uid, task in spares.values():
            session = await task
            if session is not None:
                await session.close()
            sweep(uid, confined=self.config.isolation == "bwrap")
            if session is not None:
                await _remove_cgroup(session)
        while self._cleanups:
            _, task = self._cleanups.popitem()
            await task

    # -- sessions ---------------------------------------------------------------------------

    def _sandbox_limits(self) -> SandboxLimits:
        memory = max(self.config.max_memory_mb, self.config.compile_memory_mb)
        return SandboxLimits(
            memory_mb=memory + _DRIVER_MEMORY_MB,
            cpu_s=self.config.max_item_s,
            processes=self.config.max_processes,
            file_size_mb=self.config.max_file_size_mb,
            open_files=self.config.max_open_files,
        )

    def _budget_s(self, n_cases: int, limits: CaseLimits, language: str) -> float:
        setup = _STARTUP_S + (self.config.compile_timeout_s if language == "cpp" else 0.0)
        return min(self.config.max_item_s, setup + n_cases * (limits.timeout_s + _GRACE_S))

    def _cgroup_bytes(self, limits: SandboxLimits) -> int:
        """A sandbox's memory: its processes' limit (the driver's share included) and its
        tmpfs (``/box``, ``/tmp`` and ``/dev/shm`` at their caps)."""
        tmpfs = 2 * self.config.tmpfs_mb + max(1, self.config.tmpfs_mb // 4)
        return (limits.memory_mb + tmpfs) * 1024 * 1024

    async def _new_session(self, uid: int | None) -> SandboxSession:
        deadline = asyncio.get_running_loop().time() + _STARTUP_S
        limits = self._sandbox_limits()
        cgroup = None if self.cgroups is None else self.cgroups.create(self._cgroup_bytes(limits))
        session = SandboxSession(self.config, uid, limits, deadline, self.driver_pyc, cgroup)
        try:
            await session.start()
        except BaseException:
            await session.close()
            await _remove_cgroup(session)
            raise
        return session

    async def _cleaned(self, index: int, uid: int | None) -> None:
        """Wait until the last item that ran on this slot's ``uid`` is torn down.

        The clean-up is shielded: an item cancelled while it waits (a client gone, a worker
        stopping) leaves it running, and the next user of the uid waits for it instead, so
        no sandbox is left alive, and no uid used, before its sweep.
        """
        task = self._cleanups.pop((index, uid), None)
        if task is None:
            return
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._cleanups.setdefault((index, uid), task)
            raise

    async def _cleanup(self, lease: Lease) -> None:
        sessions = [*lease.used, *([lease.spare] if lease.spare else [])]
        for session in sessions:
            await session.close()
        sweep(lease.uid, confined=self.config.isolation == "bwrap")
        for session in sessions:
            await _remove_cgroup(session)

    async def _start_spare(self, index: int, uid: int | None) -> SandboxSession | None:
        await self._cleaned(index, uid)
        try:
            return await self._new_session(uid)
        except SandboxError:
            return None  # the item that wanted it starts its own (and reports the failure)

    @contextlib.asynccontextmanager
    async def _lease(self) -> AsyncIterator[Lease]:
        """Hold a slot for one item; take its spare sandbox and start the next spare.

        The item's sandboxes are torn down (and its uid swept) in the background after the
        item's result is known; a uid is reused only once that is done (``_cleaned``).
        """
        async with self.pool.acquire() as slot:
            first, second = slot.uids
            pending = self._spares.pop(slot.index, None)
            if pending is not None:
                uid, task = pending
                try:
                    spare = await asyncio.shield(task)
                except asyncio.CancelledError:
                    # Cancelled while the spare starts: it goes on, for the next item on
                    # this slot (or ``aclose``), rather than dying with its clean-up wait.
                    self._spares.setdefault(slot.index, (uid, task))
                    raise
            else:
                uid, spare = first, None
                await self._cleaned(slot.index, uid)
            if self.prewarm:
                other = second if uid == first else first
                spare_task = asyncio.create_task(self._start_spare(slot.index, other))
                self._spares[slot.index] = (other, spare_task)
            lease = Lease(uid, spare)
            try:
                yield lease
            finally:
                self._cleanups[(slot.index, uid)] = asyncio.create_task(self._cleanup(lease))

    @contextlib.asynccontextmanager
    async def _session(self, lease: Lease, budget_s: float) -> AsyncIterator[SandboxSession]:
        session, lease.spare = lease.spare, None
        if session is None or not session.is_alive:
            if session is not None:
                await session.close()
            session = await self._new_session(lease.uid)
        session.deadline = asyncio.get_running_loop().time() + budget_s
        lease.used.append(session)  # closed by the lease's clean-up
        yield session

    def _stdio_setup(
        self,
        session: SandboxSession,
        language: str,
        code: str,
        kill_on_overflow: bool,
        cases: int,
    ) -> StdioSetup:
        box = session.box
        return {
            "role": "stdio",
            # One case (a run, the probe) has no next case to pass a count to: it pays none
            # of the namespaces' cost.
            "case_namespaces": self.case_namespaces and cases > 1,
            "program_oom_score_adj": _PROGRAM_OOM_SCORE_ADJ if session.cgroup else None,
            "seccomp": self._seccomp,
            "sys_path": list(self.config.python_paths),
            "language": language,
            "code": code,
            "kill_on_overflow": kill_on_overflow,
            "wipe_dirs": ["/tmp", "/dev/shm", "/dev/mqueue", box] if session.pid1 else [box],
            "binary": f"{box}/main",
            "compile_argv": [self.config.gxx_path, *CXX_FLAGS],
            "compile_timeout_s": self.config.compile_timeout_s,
            "compile_memory_mb": self.config.compile_memory_mb,
        }

    def _setup_s(self, language: object) -> float:
        """How long a driver may take to answer its setup, whose ``language`` (absent in a
        call setup) says whether a C++ program is compiled first."""
        return _STARTUP_S + (self.config.compile_timeout_s if language == "cpp" else 0.0)

    async def _setup(self, session: SandboxSession, setup: StdioSetup | CallSetup) -> Record:
        try:
            ready = await session.request(setup, self._setup_s(setup.get("language")))
        except TimeoutError as exc:
            raise SandboxError(f"the sandbox did not start: {session.diagnostics()}") from exc
        if ready.get("op") != "ready":
            raise SandboxError("the sandbox driver answered its setup with something else")
        return ready

    # -- scoring ----------------------------------------------------------------------------

    async def score(self, item: CodeItem, code: str) -> ItemRun:
        """Run every case of ``item`` on the program ``code`` and return its verdicts.

        Args:
            item: The tests, limits and options.
            code: The program: ``item.code``, or what was extracted from ``item.response``.

        Raises:
            SandboxError: The sandbox failed (not the program).
            BadInput: The test itself is unusable (assert tests without ``check``).
        """
        limits = effective_limits(item.limits, self.config)
        async with self._lease() as lease:
            tests = item.tests
            if isinstance(tests, StdioTests):
                return await self._score_stdio(item, code, tests, lease, limits)
            if isinstance(tests, FunctionTests):
                return await self._score_function(item, code, tests, lease, limits)
            return await self._score_assert(item, code, tests, lease, limits)

    async def _score_stdio(
        self, item: CodeItem, code: str, tests: StdioTests, lease: Lease, limits: CaseLimits
    ) -> ItemRun:
        budget = self._budget_s(len(tests.cases), limits, item.language)
        async with self._session(lease, budget) as session:
            ready = await self._setup(
                session, self._stdio_setup(session, item.language, code, True, len(tests.cases))
            )
            if ready.get("status") == "compile_error":
                return _compile_failure(_cap(str(ready.get("stderr", ""))), len(tests.cases))
            residue = False

            async def run_case(position: int, index: int) -> CaseResult:
                nonlocal session, residue
                if residue:
                    session = await self._fresh_stdio(
                        lease, session, item.language, code, len(tests.cases)
                    )
                    residue = False
                case = tests.cases[index]
                command: CaseCommand = {
                    "op": "case",
                    "i": position,
                    "stdin": case.stdin,
                    "timeout_s": limits.timeout_s,
                    "memory_mb": limits.memory_mb,
                    "max_output_bytes": limits.max_output_bytes,
                }
                record = await session.request(command, limits.timeout_s + _GRACE_S)
                execution = _execution(record, position, session)
                residue = record.get("network_residue") is True
                # At the 16 MiB output cap, a comparison with a float tolerance takes
                # about 1 s of CPU (a walk of a return value the bytes cannot decide too).
                return await off_loop_if_large(
                    len(execution.stdout),
                    _stdio_result,
                    case.stdout,
                    execution,
                    item.options.float_tolerance,
                )

            return await _each_case(len(tests.cases), item.options.stop_on_first_failure, run_case)

    async def _fresh_stdio(
        self, lease: Lease, stale: SandboxSession, language: str, code: str, cases: int
    ) -> SandboxSession:
        """A new sandbox, set up for the rest of a stdio item's cases, in place of ``stale``,
        whose network namespace a case left state in (a sandbox without case namespaces: see
        ``stdio_role``); it keeps the item's deadline, and a C++ program is compiled again.
        The lease's clean-up closes both.

        Raises:
            TimeoutError: The item's budget ran out before the new sandbox was ready (the
                program's cases spent it: ``_each_case`` fails the rest as ``time_limit``).
            SandboxError: The new sandbox failed to start, or the program did not compile
                again.
        """
        session = await self._new_session(lease.uid)
        session.deadline = stale.deadline
        lease.used.append(session)
        setup = self._stdio_setup(session, language, code, True, cases)
        ready = await session.request(setup, self._setup_s(language))
        if ready.get("op") != "ready" or ready.get("status") != "ok":
            raise SandboxError("the program did not start again in a fresh sandbox")
        return session

    async def _score_function(
        self, item: CodeItem, code: str, tests: FunctionTests, lease: Lease, limits: CaseLimits
    ) -> ItemRun:
        budget = self._budget_s(len(tests.cases), limits, item.language)
        async with self._session(lease, budget) as session:
            ready = await self._setup(session, self._call_setup(session, code, limits, budget))
            if ready.get("status") == "compile_error":
                return _compile_failure(_cap(str(ready.get("msg", ""))), len(tests.cases))

            async def run_case(position: int, index: int) -> CaseResult:
                case = tests.cases[index]
                command: CallCommand = {
                    "op": "call",
                    "i": position,
                    "target": tests.entry_point,
                    "args": encode_value(case.args),
                    "kwargs": encode_value(case.kwargs),
                    "timeout_s": limits.timeout_s,
                }
                # The first call also loads the program (module-level code): two limits.
                wait = limits.timeout_s * (2 if position == 0 else 1) + _GRACE_S
                record = await session.request(command, wait)
                return await self._call_result(session, record, position, case.expected, item)

            return await _each_case(len(tests.cases), item.options.stop_on_first_failure, run_case)

    def _call_setup(
        self, session: SandboxSession, code: str, limits: CaseLimits, budget_s: float
    ) -> CallSetup:
        return {
            "role": "call",
            "program_oom_score_adj": _PROGRAM_OOM_SCORE_ADJ if session.cgroup else None,
            "seccomp": self._seccomp,
            "sys_path": list(self.config.python_paths),
            "code": code,
            "memory_mb": limits.memory_mb,
            "cpu_budget_s": budget_s,
            "max_output_bytes": limits.max_output_bytes,
        }

    async def _call_result(
        self,
        session: SandboxSession,
        record: Record,
        index: int,
        expected: Any,
        item: CodeItem,
    ) -> CaseResult:
        if record.get("i") != index:
            raise SandboxError("the sandbox driver answered another call")
        time_ms = _float_or_none(record.get("time_ms"))
        if record.get("status") == "ok":
            reply = _value_json(record)
            try:
                matched, message = await off_loop_if_large(
                    len(reply), reply_matches, expected, reply, item.options.float_tolerance
                )
            except (ValueError, RecursionError) as exc:
                raise SandboxError(f"unreadable return value from the driver: {exc}") from exc
            verdict = TestVerdict.ACCEPTED if matched else TestVerdict.WRONG_ANSWER
            return CaseResult(verdict, time_ms, message)
        verdict, message = classify_call(record)
        if _killed(record.get("status") == "crashed", record.get("signal"), session):
            verdict, message = TestVerdict.MEMORY_LIMIT, _CGROUP_KILL
        return CaseResult(verdict, time_ms, message)

    async def _score_assert(
        self, item: CodeItem, code: str, tests: AssertTests, lease: Lease, limits: CaseLimits
    ) -> ItemRun:
        budget = min(self.config.max_item_s, 4 * limits.timeout_s + 2 * _STARTUP_S)
        solution_cm = self._session(lease, budget)
        tester_cm = self._session(lease, budget)
        async with solution_cm as solution, tester_cm as tester:
            ready = await self._setup(solution, self._call_setup(solution, code, limits, budget))
            if ready.get("status") == "compile_error":
                return _compile_failure(_cap(str(ready.get("msg", ""))), 1)
            test_setup: TestSetup = {
                "role": "test",
                "sys_path": list(self.config.python_paths),
                "test": tests.test,
                "entry_point": tests.entry_point,
            }
            await tester.send(test_setup)
            start = asyncio.get_running_loop().time()
            try:
                result = await self._relay(solution, tester, limits)
            except TimeoutError:
                result = CaseResult(TestVerdict.TIME_LIMIT, None, "the test did not finish")
            except ChannelViolation as exc:
                result = CaseResult(_forged(exc), None, str(exc))
            elapsed = round((asyncio.get_running_loop().time() - start) * 1000, 3)
            return ItemRun([CaseResult(result.verdict, elapsed, result.message)])

    async def _relay(
        self, solution: SandboxSession, tester: SandboxSession, limits: CaseLimits
    ) -> CaseResult:
        """Pass the test's calls to the program and the values back, until the test ends."""
        failure: CaseResult | None = None
        index = 0
        while True:
            record = await tester.receive()
            op = record.get("op")
            if op == "done":
                return failure or _test_verdict(record)
            if op != "call":
                raise SandboxError("the test driver sent an unknown record")
            command = _relayed_call(record, index, limits.timeout_s)
            wait = limits.timeout_s * (2 if index == 0 else 1) + _GRACE_S
            reply = await solution.request(command, wait)
            if reply.get("i") != index:
                raise SandboxError("the sandbox driver answered another call")
            index += 1
            status = reply.get("status")
            if status == "ok":
                # The value's JSON as the driver wrote it (compact ASCII), never parsed here.
                await tester.send_line(b'{"status":"ok","value":' + _value_json(reply) + b"}")
            elif status == "callable" and command["get"]:
                await tester.send({"status": "callable"})
            elif status == "raised":
                await tester.send(
                    {"status": "raised", "exc": reply.get("exc", ""), "msg": reply.get("msg", "")}
                )
            else:
                verdict, message = classify_call(reply)
                if _killed(reply.get("status") == "crashed", reply.get("signal"), solution):
                    verdict, message = TestVerdict.MEMORY_LIMIT, _CGROUP_KILL
                failure = CaseResult(verdict, None, message)
                await tester.send({"status": "abort"})

    # -- run ----------------------------------------------------------------------------------

    async def run(self, item: RunItem) -> Execution:
        """Run a program once on ``item.stdin`` and return what happened.

        Raises:
            SandboxError: The sandbox failed (not the program).
        """
        limits = effective_limits(item.limits, self.config)
        budget = self._budget_s(1, limits, item.language)
        async with (
            self._lease() as lease,
            self._session(lease, budget) as session,
        ):
            ready = await self._setup(
                session, self._stdio_setup(session, item.language, item.code, False, 1)
            )
            if ready.get("status") == "compile_error":
                return Execution.from_record(ready)
            command: CaseCommand = {
                "op": "case",
                "i": 0,
                "stdin": item.stdin,
                "timeout_s": limits.timeout_s,
                "memory_mb": limits.memory_mb,
                "max_output_bytes": limits.max_output_bytes,
            }
            try:
                record = await session.request(command, limits.timeout_s + _GRACE_S)
                return _execution(record, 0, session)
            except TimeoutError:
                return Execution("timeout", None, int(signal.SIGKILL), b"", b"", False, False, None)
            except ChannelViolation as exc:
                raise SandboxError(f"result channel violated: {exc}") from exc


def _killed(signaled: bool, sig: int | None, session: SandboxSession) -> bool:
    """Whether a process that died of SIGKILL (not at its time limit) was killed by the
    kernel for its sandbox's memory cgroup."""
    return signaled and sig == int(signal.SIGKILL) and session.oom_killed()


async def _remove_cgroup(session: SandboxSession) -> None:
    """Remove a closed sandbox's cgroup once the kernel has let its last process go."""
    if session.cgroup is None:
        return
    for _ in range(50):
        if session.cgroup.remove():
            return
        await asyncio.sleep(0.02)
    logger.warning("the memory cgroup %s is still busy; left in place", session.cgroup.path)


def _execution(record: Record, index: int, session: SandboxSession) -> Execution:
    if record.get("i") != index:
        raise SandboxError("the sandbox driver answered another case")
    try:
        execution = Execution.from_record(record)
    except (KeyError, ValueError, TypeError) as exc:
        raise SandboxError(f"malformed case record from the driver: {exc!r}") from exc
    if _killed(execution.status == "signaled", execution.signal, session):
        return dataclasses.replace(execution, memory_killed=True)
    return execution


_ORDER = random.SystemRandom()


def case_order(n: int) -> list[int]:
    """A random order of ``n`` cases (a permutation of ``range(n)``), from the operating
    system's randomness, drawn for each item: the order the cases run in, which the sandbox
    never learns (see the module's docstring)."""
    order = list(range(n))
    _ORDER.shuffle(order)
    return order


def in_case_order(results: list[CaseResult], order: list[int]) -> list[CaseResult]:
    """``results`` of the cases in the order they ran (``results[k]`` is case ``order[k]``'s)
    back in the item's own order.

    Raises:
        ValueError: ``results`` and ``order`` differ in length.
    """
    by_case = dict(zip(order, results, strict=True))
    return [by_case[index] for index in range(len(order))]


def _compile_failure(message: str | None, total: int) -> ItemRun:
    """Every case of a program that does not compile gets ``compile_error``."""
    return ItemRun(
        [CaseResult(TestVerdict.COMPILE_ERROR, None, message)] * total, compile_message=message
    )


async def _each_case(
    cases: int, stop_on_first_failure: bool, run_case: Callable[[int, int], Awaitable[CaseResult]]
) -> ItemRun:
    """The per-case loop of every role: run ``cases`` cases in a random order
    (:func:`case_order`), ``run_case(position, index)`` each (``position`` in the run,
    ``index`` in the item), and return their results in the item's order.

    After a failure, with ``stop_on_first_failure``, the rest are ``skipped``. A driver that
    stops answering (``TimeoutError``) fails this case and the rest as ``time_limit``; a
    forged record (``ChannelViolation``) fails them as the program's fault. ``SandboxError``
    propagates.
    """
    order = case_order(cases)
    results: list[CaseResult] = []
    for position, index in enumerate(order):
        if _stopped(stop_on_first_failure, results):
            results.append(CaseResult(TestVerdict.SKIPPED))
            continue
        try:
            results.append(await run_case(position, index))
        except TimeoutError:
            return ItemRun(in_case_order(_fail_rest(results, cases, TestVerdict.TIME_LIMIT), order))
        except ChannelViolation as exc:
            return ItemRun(in_case_order(_fail_rest(results, cases, _forged(exc)), order))
    return ItemRun(in_case_order(results, order))


def _stdio_result(expected: str, execution: Execution, tolerance: float | None) -> CaseResult:
    """A stdio case's verdict: its status, then its output against ``expected``; a failed
    case keeps excerpts of its output."""
    verdict, message = classify_execution(execution)
    if verdict is None:
        matched = stdout_matches(expected, execution.stdout, tolerance)
        verdict = TestVerdict.ACCEPTED if matched else TestVerdict.WRONG_ANSWER
    if verdict is TestVerdict.ACCEPTED:
        return CaseResult(verdict, execution.time_ms, message)
    return CaseResult(
        verdict,
        execution.time_ms,
        message,
        _excerpt(execution.stdout),
        _excerpt(execution.stderr),
    )


def _relayed_call(record: Record, index: int, timeout_s: float) -> CallCommand:
    """The call the test role asked for (a ``TestCall``: its fields as it sent them), for
    the program's sandbox.

    Raises:
        SandboxError: The record lacks a field of a ``TestCall`` (the driver writes all).
    """
    try:
        target, args, kwargs = record["target"], record["args"], record["kwargs"]
    except KeyError as exc:
        raise SandboxError(f"the test driver sent a call without {exc}") from exc
    return {
        "op": "call",
        "i": index,
        "target": target,
        "args": args,
        "kwargs": kwargs,
        "get": bool(record.get("get")),
        "timeout_s": timeout_s,
    }


def _stopped(stop_on_first_failure: bool, results: list[CaseResult]) -> bool:
    """True once a case failed and the item asked to stop at the first failure."""
    return (
        stop_on_first_failure and bool(results) and results[-1].verdict is not TestVerdict.ACCEPTED
    )


def _fail_rest(results: list[CaseResult], total: int, verdict: TestVerdict) -> list[CaseResult]:
    message = "the sandbox stopped answering" if verdict is TestVerdict.TIME_LIMIT else None
    return results + [CaseResult(verdict, None, message)] * (total - len(results))


def _forged(exc: ChannelViolation) -> TestVerdict:
    # Only the program can have written a record without the token: its fault, not ours.
    return TestVerdict.RUNTIME_ERROR


def _value_json(record: Record) -> bytes:
    """The bytes of a call's return value (``SandboxSession.receive`` reads them)."""
    value = record.get("value_json")
    if type(value) is not bytes:
        raise SandboxError("the sandbox driver sent a return value without its bytes")
    return value


def _float_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _test_verdict(record: Record) -> CaseResult:
    status = record.get("status")
    message = _cap(str(record.get("msg", "")) or None)
    if status == "passed":
        return CaseResult(TestVerdict.ACCEPTED)
    if status == "failed":
        return CaseResult(TestVerdict.WRONG_ANSWER, None, message or "assertion failed")
    if status == "remote_error":
        memory = (message or "").startswith("MemoryError")
        verdict = TestVerdict.MEMORY_LIMIT if memory else TestVerdict.RUNTIME_ERROR
        return CaseResult(verdict, None, message)
    if status == "test_error":
        return CaseResult(TestVerdict.WRONG_ANSWER, None, message)
    if status == "bad_test":
        raise BadInput(f"unusable test: {message}", field="tests.test")
    raise SandboxError(f"the test ended unexpectedly ({status})")
