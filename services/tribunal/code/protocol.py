"""The messages between the service, the sandbox's driver and the program's worker.

Three parties, two trust boundaries. The *service* and the *driver* (trusted code that starts
in the sandbox before any untrusted code, ``driver.py``) talk over pipes the service opens
before the sandbox starts:

* fd 0 of the driver, commands: first :data:`TOKEN_BYTES` raw bytes are a per-run random
  token, then one JSON object per line: a setup (:class:`StdioSetup`, :class:`CallSetup` or
  :class:`TestSetup`), then :class:`CaseCommand` or :class:`CallCommand` lines, or
  :class:`RelayReply` lines for the test role, and :class:`ExitCommand`.
* the result fd, records: ``<token> <json>\\n`` (:class:`ReadyRecord`, :class:`CaseRecord`,
  :class:`CallRecord`, :class:`TestCall`, :class:`DoneRecord`). Only the driver holds it. A
  record with ``value_bytes`` (a call's return value) is followed by that many bytes: the
  value's :class:`Wire` as compact ASCII JSON (:func:`dumps`), outside the record so that the
  service can compare it with the expected value's JSON before parsing it.

The *worker* (``call`` role) is a process of the driver that runs the program, so everything
it writes is the program's: its :class:`WorkerReply` lines cross a trust boundary, and the
driver rebuilds each one from :data:`WORKER_REPLY_KEYS` (the known statuses and the keys each
may carry) before it passes anything on; the statuses in :data:`DRIVER_CALL_STATUSES` are the
driver's own and never come from the worker.

This module ships into the sandbox with ``codec.py`` and the driver's modules (see
``sandbox.driver_source``): only cheap C modules at import time, and the message types exist
for the type checker only (``typing`` would pull in ``re`` and ``enum``, about 15 ms per
sandbox).
"""

from __future__ import annotations

import _json

MYPY = False
if MYPY:  # annotations only (``from __future__ import annotations``): never imported at run time
    from typing import Any, Literal, NotRequired, TypedDict

TOKEN_BYTES = 32
"""Length of the per-run token that prefixes every record of the result channel."""

MAX_MESSAGE_CHARS = 2000
"""Program text (a message, a repr, compiler output) is capped at this many characters."""

WORKER_REPLY_KEYS: dict[str, tuple[str, ...]] = {
    "ready": ("i", "status"),
    "callable": ("i", "status"),
    "raised": ("i", "status", "exc", "msg"),
    "load_error": ("i", "status", "exc", "msg"),
    "ok": ("i", "status", "value"),
}
"""The statuses a worker may send, and the keys each reply carries (``i`` an int, ``exc`` and
``msg`` strings, ``value`` a wire value): anything else is a protocol violation."""

DRIVER_CALL_STATUSES = frozenset(("timeout", "crashed", "output_limit", "protocol"))
"""Statuses of a call that only the driver gives (the worker cannot claim them)."""

CASE_STATUSES = frozenset(("exited", "signaled", "timeout", "compile_error"))
"""Statuses of a stdio case record."""

TEST_STATUSES = frozenset(("passed", "failed", "remote_error", "test_error", "bad_test", "aborted"))
"""Statuses of the test role's :class:`DoneRecord`."""

if MYPY:

    class Wire(TypedDict):
        """A value in the codec's tagged-JSON form (``codec.encode_value``): the value and
        the objects it refers to."""

        v: Any
        o: list[Any]

    class StdioSetup(TypedDict):
        """First command of a ``stdio`` sandbox: the program and how to build it; with
        ``case_namespaces``, each case in namespaces of its own where the driver may; with
        ``program_oom_score_adj`` (in a memory cgroup), the program's processes' score."""

        role: Literal["stdio"]
        case_namespaces: bool
        program_oom_score_adj: int | None
        seccomp: str | None
        sys_path: list[str]
        language: str
        code: str
        kill_on_overflow: bool
        wipe_dirs: list[str]
        binary: str
        compile_argv: list[str]
        compile_timeout_s: float
        compile_memory_mb: int

    class CallSetup(TypedDict):
        """First command of a ``call`` sandbox: the program its worker loads
        (``program_oom_score_adj``, in a memory cgroup: the worker's, above the driver's)."""

        role: Literal["call"]
        program_oom_score_adj: int | None
        seccomp: str | None
        sys_path: list[str]
        code: str
        memory_mb: int
        cpu_budget_s: float
        max_output_bytes: int

    class TestSetup(TypedDict):
        """First command of a ``test`` sandbox: the trusted test and the name it checks."""

        role: Literal["test"]
        sys_path: list[str]
        test: str
        entry_point: str

    class CaseCommand(TypedDict):
        """Run the stdio program once on ``stdin``; ``i`` is the case's position in the run
        (the service's random order, never the case's index in its item: the program can read
        it from the driver's frames)."""

        op: Literal["case"]
        i: int
        stdin: str
        timeout_s: float
        memory_mb: int
        max_output_bytes: int

    class CallCommand(TypedDict):
        """Call ``target`` (``add``, ``Solution().twoSum``) in the worker; with ``get``, ask
        what the name is (a callable stays in the sandbox, data comes back). ``i`` counts the
        calls (for a scored item, the position in its random order, as for a case)."""

        op: Literal["call"]
        i: int
        target: str
        args: Wire
        kwargs: Wire
        get: NotRequired[bool]
        timeout_s: float

    class ExitCommand(TypedDict):
        """Kill every process of the sandbox and exit."""

        op: Literal["exit"]

    class RelayReply(TypedDict, total=False):
        """The service's answer to a :class:`TestCall` (``abort``: the program failed)."""

        status: Literal["ok", "callable", "raised", "abort"]
        value: Wire
        exc: str
        msg: str

    class ReadyRecord(TypedDict, total=False):
        """The driver's answer to its setup (``stderr`` of a stdio compile error, ``msg`` of
        a call role's; ``case_namespaces``: whether a stdio role's cases get their own)."""

        op: Literal["ready"]
        status: Literal["ok", "compile_error"]
        case_namespaces: bool
        stderr: str
        msg: str
        compile_ms: float

    class CaseRecord(TypedDict, total=False):
        """What one stdio case did (``stdout`` and ``stderr`` base64, capped; with
        ``network_residue``, it left state in the sandbox's network namespace, which the
        item's later cases must not share)."""

        i: int
        status: str
        exit_code: int | None
        signal: int | None
        stdout: str
        stderr: str
        stdout_truncated: bool
        stderr_truncated: bool
        time_ms: float
        network_residue: bool

    class CallRecord(TypedDict, total=False):
        """What one call did: a worker status, or one of :data:`DRIVER_CALL_STATUSES`
        (inside the driver, ``value`` of ``ok``; on the result channel, ``value_bytes``: the
        length of the value's JSON, which follows the record)."""

        i: int
        status: str
        value: Wire
        value_bytes: int
        exc: str
        msg: str
        exit_code: int | None
        signal: int | None
        time_ms: float

    class TestCall(TypedDict):
        """The test role asks the service to relay a call to the program's sandbox."""

        op: Literal["call"]
        target: str
        args: Wire
        kwargs: Wire
        get: bool

    class DoneRecord(TypedDict, total=False):
        """The test role's end: one of :data:`TEST_STATUSES`."""

        op: Literal["done"]
        status: str
        msg: str
        calls: int

    class InterpSetup(TypedDict):
        """First command of an ``interp`` sandbox (a code-interpreter session,
        ``interp_role.py``): the interpreter's limits for the whole session."""

        role: Literal["interp"]
        seccomp: str | None
        sys_path: list[str]
        program_oom_score_adj: int | None
        memory_mb: int
        cpu_budget_s: float
        max_output_bytes: int

    class CellCommand(TypedDict):
        """Run one cell in the ``interp`` role's interpreter."""

        op: Literal["cell"]
        code: str
        timeout_s: float
        max_output_bytes: int

    class CellError(TypedDict):
        """What a cell raised (``interp_role.INTERP_REPLY_KEYS["error"]``)."""

        ename: str
        evalue: str
        traceback: str

    Command = (
        StdioSetup
        | CallSetup
        | TestSetup
        | InterpSetup
        | CaseCommand
        | CallCommand
        | CellCommand
        | RelayReply
        | ExitCommand
    )
    """Any line the service sends to a driver."""

    class Record(TypedDict, total=False):
        """Any record of the result channel as the service receives it
        (``sandbox.SandboxSession.receive``): the keys of :class:`ReadyRecord`,
        :class:`CaseRecord`, :class:`CallRecord`, :class:`TestCall`, :class:`DoneRecord`
        and the ``interp`` role's cell record, each optional, since which record came is
        known only once ``op``/``status`` are read. A call's return value arrives as
        ``value_json``: the bytes that followed the record (``value_bytes`` of
        :class:`CallRecord`), unparsed."""

        op: str
        status: str
        i: int
        msg: str
        case_namespaces: bool
        compile_ms: float
        exit_code: int | None
        signal: int | None
        stdout: str
        stderr: str
        stdout_truncated: bool
        stderr_truncated: bool
        time_ms: float
        value_json: bytes
        exc: str
        target: str
        args: Wire
        kwargs: Wire
        get: bool
        calls: int
        alive: bool
        display: str | None
        error: CellError | None

    class WorkerRequest(TypedDict):
        """Driver to worker: one call (``args``/``kwargs`` wire values)."""

        i: int
        target: str
        args: Wire
        kwargs: Wire
        get: bool

    class WorkerReply(TypedDict, total=False):
        """Worker to driver (untrusted): see :data:`WORKER_REPLY_KEYS`."""

        i: int
        status: str
        exc: str
        msg: str
        value: Wire


# --------------------------------------------------------------------------------------------
# JSON without importing ``json`` (the C accelerator directly; same output as json.dumps with
# separators=(",", ":"), allow_nan=False; loads refuses NaN/Infinity and trailing data)
# --------------------------------------------------------------------------------------------


def _no_default(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON here")


_ENCODE = _json.make_encoder(
    {}, _no_default, _json.encode_basestring_ascii, None, ":", ",", False, False, False
)


class _ScanContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_no_constant)
    memo: dict[Any, Any] = {}  # noqa: RUF012 - the C scanner reads it and keeps its own


_SCAN = _json.make_scanner(_ScanContext())  # type: ignore[arg-type]
_WHITESPACE = " \t\n\r"


def dumps(value: Any) -> str:
    """Serialise JSON compactly (ASCII, no NaN); raise TypeError/ValueError otherwise."""
    return "".join(_ENCODE(value, 0))


def loads(text: str | bytes) -> Any:
    """Parse one JSON document; raise ValueError on anything else."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _SCAN(text, start)
    except (StopIteration, SystemError):
        # Without ``json.decoder`` in sys.modules the C scanner cannot build its error and
        # returns NULL (SystemError): both mean "not JSON".
        raise ValueError("not JSON") from None
    if text[end:].strip(_WHITESPACE):
        raise ValueError("trailing data after JSON")
    return value


# --------------------------------------------------------------------------------------------
# Program text
# --------------------------------------------------------------------------------------------


def escape_text(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The one escape point of program text (messages, names, reprs) into results.

    Caps ``text`` at ``limit`` characters and writes each lone surrogate as the six characters
    ``\\udXXX``: the result is valid UTF-8, so JSON, orjson and pydantic all write it (a lone
    surrogate in an exception message once failed a whole batch). Never raises.
    """
    try:
        text = str.__str__(text)[:limit]
        if text.isascii():
            return text
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
        return text
    except BaseException:
        return "<unprintable>"


def exception_name(exc: BaseException) -> str:
    """The class name of a (possibly hostile) exception, escaped."""
    try:
        name = type(exc).__name__
        return escape_text(name, 200) if isinstance(name, str) else "<unnamed>"
    except BaseException:
        return "<unnamed>"


def describe(exc: BaseException, with_type: bool = True) -> str:
    """``Type: message`` of a (possibly hostile) exception, capped; never raises."""
    try:
        text = str(exc)
        text = str.__str__(text) if isinstance(text, str) else ""
    except BaseException:
        text = "<unprintable>"
    text = f"{exception_name(exc)}: {text}" if with_type else text
    return escape_text(text)
