"""The driver's ``interp`` role: one long-lived Python interpreter, cell after cell.

Ships into the sandbox as part of the driver's unit (``sandbox.driver_source``: after
``driver_base.py``, before ``driver.py``, which dispatches the role), so only cheap modules at
import time and nothing of ``tribunal`` at run time but the unit's own names.

The driver (trusted, pid 1 of the sandbox) forks one *interpreter* process at setup. That
process drops every trusted handle (the result channel and its token, the command pipe), the
capabilities, installs the seccomp filter and lowers its rlimits, exactly as a stdio case's
program does (``_Driver.confine``); then it runs the cells it is sent in one ``__main__``
namespace, so a variable defined by one cell is there for the next. Everything it writes is
the program's: its replies are rebuilt by the driver from the known keys
(:data:`INTERP_REPLY_KEYS`) before anything is passed on, and its stdout and stderr are pipes
the driver reads with a cap.

Per cell the driver enforces the wall-clock limit: at the limit it sends SIGINT (the cell
gets ``KeyboardInterrupt``, as in a notebook, and the state survives); an interpreter that
has not answered :data:`INTERRUPT_GRACE_S` later is SIGKILLed and the session is over
(``alive`` false in the record). An interpreter that dies (``os._exit``, a signal, its memory
limit, its CPU budget as ``RLIMIT_CPU``) ends the session the same way: never a silent
fresh interpreter.

Why this loop and not a Jupyter kernel: a kernel is a ZeroMQ server with five sockets and a
signed-message protocol running in the untrusted process, with ``ipykernel``, ``tornado`` and
``pyzmq`` (and their start-up, about a second) inside the sandbox; its control channel would
have to be reachable from the service, through the sandbox's network namespace. Here the
program never holds anything the service trusts: the driver keeps the only handle on the
result channel, as it does for every run, and the program's sole way out is the output pipes
and its own reply line.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import sys
import time

from tribunal.code.codec import b64encode
from tribunal.code.protocol import dumps, escape_text, loads

MYPY = False
if MYPY:  # annotations only (``from __future__ import annotations``): never imported at run time
    from typing import Any

    from tribunal.code.driver_base import _Driver

INTERRUPT_GRACE_S = 1.0
"""How long an interrupted cell has to answer before its interpreter is killed (s)."""

INTERP_REPLY_KEYS: dict[str, tuple[str, ...]] = {
    "ok": ("display",),
    "error": ("ename", "evalue", "traceback"),
}
"""The statuses an interpreter may reply with, and the string keys each reply may carry."""

_REPLY_ROOM = 64 * 1024
"""Room in a reply line beside its display and traceback (each at most the output cap)."""


def _interp_main(requests_fd: int, replies_fd: int, cap: int) -> None:  # pragma: no cover
    """In the interpreter process: run each cell of ``requests_fd`` in one namespace and
    answer on ``replies_fd``; never returns (EOF on the requests exits)."""
    import ast
    import builtins
    import contextlib
    import io
    import linecache
    import traceback

    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), "utf-8")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), "utf-8")
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), "utf-8", errors="backslashreplace", line_buffering=True
    )
    for name in ("stdin", "stdout", "stderr"):
        setattr(sys, f"__{name}__", getattr(sys, name))
    sys.argv = [""]
    module = type(sys)("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    namespace = module.__dict__
    buffer = bytearray()
    cells = 0
    while True:
        while b"\n" not in buffer:
            chunk = os.read(requests_fd, 1 << 16)
            if not chunk:
                os._exit(0)
            buffer += chunk
        line, _, rest = bytes(buffer).partition(b"\n")
        buffer = bytearray(rest)
        reply: dict[str, Any]
        cells += 1
        name = f"<cell {cells}>"
        try:
            source = str(loads(line)["code"])
            # Kept for tracebacks (they show the cell's lines, as a notebook's do).
            linecache.cache[name] = (len(source), None, source.splitlines(True), name)
            tree = ast.parse(source, name, "exec")
            last = None
            final = tree.body[-1] if tree.body else None
            if isinstance(final, ast.Expr):
                tree.body.pop()
                last = ast.Expression(final.value)
            exec(compile(tree, name, "exec"), namespace)
            display = None
            if last is not None:
                value = eval(compile(last, name, "eval"), namespace)
                if value is not None:
                    namespace["_"] = value
                    display = escape_text(repr(value), cap)
            reply = {"status": "ok", "display": display}
        except BaseException as exc:  # the cell's own failure, reported like a notebook's
            reply = _error_reply(exc, cap, traceback)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):  # a broken stream is the cell's business
                stream.flush()
        data = (dumps(reply) + "\n").encode()
        while data:
            data = data[os.write(replies_fd, data) :]


def _error_reply(exc: BaseException, cap: int, traceback: Any) -> dict[str, Any]:
    try:
        # From the cell's first frame: the interpreter's own loop is no part of it.
        frames = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        text = "".join(traceback.format_exception(type(exc), exc, frames))
        evalue = str(exc)
    except BaseException:  # a hostile __str__: the class name is all we say
        text, evalue = "", ""
    return {
        "status": "error",
        "ename": escape_text(type(exc).__name__, 200),
        "evalue": escape_text(evalue, cap),
        "traceback": escape_text(text[-cap:], cap),
    }


class _Pipe:
    """One output pipe of the interpreter, read without blocking and kept up to a cap."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.data = bytearray()
        self.truncated = False
        self.cap = 0

    def start(self, cap: int) -> None:
        self.data = bytearray()
        self.truncated = False
        self.cap = cap

    def pump(self) -> bool:
        """Read what is there; False at EOF."""
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            room = self.cap - len(self.data)
            if len(chunk) > room:
                self.truncated = True
            if room > 0:
                self.data += chunk[:room]


class InterpRole:
    """The driver's side of an interpreter session (see the module docstring)."""

    def __init__(self, driver: _Driver, setup: dict[str, Any]) -> None:
        self.driver = driver
        self.memory_mb = int(setup["memory_mb"])
        self.cpu_budget_s = float(setup["cpu_budget_s"])
        self.max_output_bytes = int(setup["max_output_bytes"])
        self.worker: int | None = None
        self.requests = -1
        self.replies = -1
        self.reply_buffer = bytearray()
        self.out: _Pipe | None = None
        self.err: _Pipe | None = None

    def prepare(self) -> dict[str, Any]:
        """Fork the interpreter; the ready record."""
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        null = os.open("/dev/null", os.O_RDONLY)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the interpreter
            try:
                self.driver.chan.burn()
                if not self.driver.pid1:
                    os.setpgid(0, 0)
                for fd, target in ((null, 0), (out_w, 1), (err_w, 2), (requests_r, 3)):
                    os.dup2(fd, target)
                os.dup2(replies_w, 4)
                os.closerange(5, 65536)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                self.driver.confine()
                limit = self.memory_mb * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                cpu = max(1, int(self.cpu_budget_s + 0.999))
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
                _interp_main(3, 4, self.max_output_bytes)
            finally:
                os._exit(127)
        self.driver.groups.add(pid)
        for fd in (requests_r, replies_w, out_w, err_w, null):
            os.close(fd)
        self.worker, self.requests, self.replies = pid, requests_w, replies_r
        self.out, self.err = _Pipe(out_r), _Pipe(err_r)
        return {"op": "ready", "status": "ok"}

    def call(self, cmd: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
        """Run one cell (``{"op": "cell", "code", "timeout_s", "max_output_bytes"}``)."""
        return self._cell(cmd), None

    def _cell(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.out is not None and self.err is not None
        if self.worker is None:
            return self._record("crashed", time.monotonic(), None, alive=False)
        cap = min(int(cmd["max_output_bytes"]), self.max_output_bytes)
        self.out.start(cap)
        self.err.start(cap)
        start = time.monotonic()
        deadline = start + float(cmd["timeout_s"])
        if not self._send((dumps({"code": str(cmd["code"])}) + "\n").encode(), deadline):
            return self._end("timeout", start)
        reply = self._await_reply(deadline)
        if reply == "timeout":
            _kill(self.worker, signal.SIGINT)
            reply = self._await_reply(time.monotonic() + INTERRUPT_GRACE_S)
            if isinstance(reply, dict):
                return self._record("timeout", start, reply, alive=True)
            return self._end("timeout", start)
        if not isinstance(reply, dict):  # "eof"
            return self._end("crashed", start)
        return self._record(str(reply["status"]), start, reply, alive=True)

    def _send(self, data: bytes, deadline: float) -> bool:
        view = memoryview(data)
        while view:
            wait_ms = int((deadline - time.monotonic()) * 1000)
            if wait_ms <= 0 or not select.select([], [self.requests], [], wait_ms / 1000)[1]:
                return False
            try:
                view = view[os.write(self.requests, view[: 1 << 16]) :]
            except (BrokenPipeError, OSError):
                return False
        return True

    def _await_reply(self, deadline: float) -> dict[str, Any] | str:
        """The interpreter's checked reply, ``"timeout"`` or ``"eof"`` (it died, or closed
        its reply pipe, or broke the protocol)."""
        assert self.out is not None and self.err is not None
        poller = select.poll()
        for fd in (self.replies, self.out.fd, self.err.fd):
            poller.register(fd, select.POLLIN)
        limit = 4 * self.max_output_bytes + _REPLY_ROOM
        while b"\n" not in self.reply_buffer:
            wait_ms = int((deadline - time.monotonic()) * 1000)
            if wait_ms <= 0:
                return "timeout"
            for fd, _ in poller.poll(wait_ms):
                if (fd == self.out.fd and not self.out.pump()) or (
                    fd == self.err.fd and not self.err.pump()
                ):
                    poller.unregister(fd)
                elif fd == self.replies:
                    chunk = os.read(self.replies, 1 << 16)
                    if not chunk or len(self.reply_buffer) > limit:
                        return "eof"
                    self.reply_buffer += chunk
        line, _, rest = bytes(self.reply_buffer).partition(b"\n")
        self.reply_buffer = bytearray(rest)
        self.out.pump()
        self.err.pump()
        return _checked(line) or "eof"

    def _end(self, status: str, start: float) -> dict[str, Any]:
        """The interpreter is gone or beyond saving: kill it, reap it, say so."""
        assert self.worker is not None
        pid, self.worker = self.worker, None
        _kill(pid, signal.SIGKILL)
        wait_status = self.driver.exited.pop(pid, None)
        if wait_status is None:
            try:
                wait_status = os.waitpid(pid, 0)[1]
            except ChildProcessError:
                wait_status = None
        assert self.out is not None and self.err is not None
        self.out.pump()
        self.err.pump()
        record = self._record(status, start, None, alive=False)
        if wait_status is not None and os.WIFSIGNALED(wait_status):
            record["signal"] = os.WTERMSIG(wait_status)
        elif wait_status is not None:
            record["exit_code"] = os.waitstatus_to_exitcode(wait_status)
        return record

    def _record(
        self, status: str, start: float, reply: dict[str, Any] | None, *, alive: bool
    ) -> dict[str, Any]:
        assert self.out is not None and self.err is not None
        return {
            "op": "cell",
            "status": status,
            "alive": alive,
            "display": None if reply is None else reply.get("display"),
            "error": None if reply is None or reply["status"] != "error" else {
                key: reply[key] for key in INTERP_REPLY_KEYS["error"]
            },
            "stdout": b64encode(bytes(self.out.data)),
            "stderr": b64encode(bytes(self.err.data)),
            "stdout_truncated": self.out.truncated,
            "stderr_truncated": self.err.truncated,
            "time_ms": round((time.monotonic() - start) * 1000, 3),
        }  # fmt: skip


def _checked(line: bytes) -> dict[str, Any] | None:
    """The interpreter's reply rebuilt from its known keys, or None (a protocol violation)."""
    try:
        reply = loads(line)
    except (ValueError, RecursionError):
        return None
    if type(reply) is not dict or reply.get("status") not in INTERP_REPLY_KEYS:
        return None
    status = reply["status"]
    checked: dict[str, Any] = {"status": status}
    for key in INTERP_REPLY_KEYS[status]:
        value = reply.get(key)
        if value is not None and type(value) is not str:
            return None
        checked[key] = value
    return checked


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        return
