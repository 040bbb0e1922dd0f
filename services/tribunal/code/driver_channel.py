"""The driver's channels: the token-prefixed result channel and the command reader.

Part of the driver's unit (``sandbox.driver_source``, in the order of ``sandbox._SHIPPED``):
only cheap C modules at import time, nothing of ``tribunal`` at run time but the unit's own
names. See ``driver.py`` for the channels' layout.
"""

from __future__ import annotations

import os
import select
import time

from tribunal.code.protocol import dumps

MYPY = False
if MYPY:  # annotations only (``from __future__ import annotations``): never imported at run time
    from collections.abc import Callable, Mapping
    from typing import Any

_READ_CHUNK = 1 << 16
_MAX_COMMAND_BYTES = 256 * 1024 * 1024


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
