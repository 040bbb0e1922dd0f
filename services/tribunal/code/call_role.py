"""The driver's ``call`` role: one worker process that loaded the program answers calls,
values crossing as tagged JSON; the driver rebuilds each of the worker's (untrusted) replies
from the known keys.

Part of the driver's unit (``sandbox.driver_source``, in the order of ``sandbox._SHIPPED``):
only cheap C modules at import time, nothing of ``tribunal`` at run time but the unit's own
names.
"""

from __future__ import annotations

import _signal as signal
import builtins
import os
import select
import time

from tribunal.code.codec import decode_value, encode_value, wire_problem
from tribunal.code.driver_base import _Driver, _status_of
from tribunal.code.driver_channel import _LineReader, _quietly, _write_all
from tribunal.code.driver_confine import _set_limits
from tribunal.code.protocol import (
    DRIVER_CALL_STATUSES,
    WORKER_REPLY_KEYS,
    describe,
    dumps,
    escape_text,
    exception_name,
    loads,
)

MYPY = False
if MYPY:  # annotations only (``from __future__ import annotations``): never imported at run time
    from typing import Any

    from tribunal.code.protocol import (
        CallCommand,
        CallRecord,
        CallSetup,
        WorkerReply,
        WorkerRequest,
    )

_REPLY_KEYS_BYTES = 4096
"""Room in a worker's reply line for its keys, beside a value of up to the output cap."""


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
                _set_limits(self.memory_mb, self.cpu_budget_s, self.driver.filter is not None)
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
