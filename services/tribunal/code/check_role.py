"""The driver's ``test`` role: a trusted ``check(candidate)`` whose candidate is a proxy; its
calls are relayed by the service to the program's ``call`` sandbox.

Part of the driver's unit (``sandbox.driver_source``, in the order of ``sandbox._SHIPPED``):
only cheap C modules at import time, nothing of ``tribunal`` at run time but the unit's own
names.
"""

from __future__ import annotations

import builtins
import sys

from tribunal.code.codec import CodecError, decode_value, encode_value
from tribunal.code.driver_base import _Driver
from tribunal.code.protocol import describe, loads

MYPY = False
if MYPY:  # annotations only (``from __future__ import annotations``): never imported at run time
    from typing import Any

    from tribunal.code.protocol import DoneRecord, TestCall, TestSetup


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
