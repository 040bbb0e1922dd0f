"""The driver's ``stdio`` role: each case a fresh process (a fork of the warm interpreter, or
the compiled binary), its output captured with caps, its wall-clock limit enforced, the
sandbox cleaned after it.

Part of the driver's unit (``sandbox.driver_source``, in the order of ``sandbox._SHIPPED``):
only cheap C modules at import time, nothing of ``tribunal`` at run time but the unit's own
names.
"""

from __future__ import annotations

import _signal as signal
import binascii
import os
import select
import sys
import time

from tribunal.code.codec import b64encode
from tribunal.code.driver_base import _Driver, _status_of, _wait_status
from tribunal.code.driver_channel import _READ_CHUNK, _quietly, _write_all
from tribunal.code.driver_confine import (
    _CaseNamespaces,
    _clean_dir,
    _mode_of,
    _network_state,
    _remove_ipc,
    _set_limits,
)
from tribunal.code.protocol import MAX_MESSAGE_CHARS, describe

MYPY = False
if MYPY:  # annotations only (``from __future__ import annotations``): never imported at run time
    from collections.abc import Callable
    from typing import Any

    from tribunal.code.protocol import CaseCommand, StdioSetup

_WIPE_DIRS_DEFAULT: tuple[str, ...] = ()


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
            # Without the filter, a network namespace per case from the start (see
            # ``_CaseNamespaces``); with it, from the first case that left state in the
            # sandbox's.
            network = driver.filter is None
            self.namespaces = _CaseNamespaces.open(self.wipe_dirs, self.modes, network)
        self.network: list[bytes] | None = None
        """The sandbox's network namespace before the first case (``_network_state``)."""
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
        if self.driver.pid1:
            self.network = _network_state(self.driver.filter is not None)
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
        Where the case shares the sandbox's network namespace, the driver compares the
        namespace's state before and after it (:meth:`_network_changed`): with case
        namespaces, a change gives every later case a network namespace of its own; without
        them, the record says ``network_residue`` and the service runs the item's later cases
        in a new sandbox.
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
            if not namespaces.network and self._network_changed():
                namespaces.network = True
        status_r, status_w = os.pipe() if namespaces is not None else (-1, -1)
        start = time.monotonic()
        pid = os.fork() if namespaces is None else namespaces.fork()
        if pid == 0:  # child
            try:
                if namespaces is not None:
                    self.driver.chan.burn()
                    namespaces.enter(status_w)
                self.driver.enter_child(stdin_fd, out_w, err_w, self.binary_fd)
                _set_limits(memory_mb, timeout_s + 1, self.driver.filter is not None)
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
        elif wipe:
            self._clean_up(result)
        return result

    def _clean_up(self, result: dict[str, Any]) -> None:
        """After a case that shared the sandbox (every process of it gone): empty the
        writable directories and remove its IPC objects, and say in ``result`` whether it
        left state in the network namespace."""
        for path in self.wipe_dirs:
            _clean_dir(path, self.modes[path])
        if self.driver.pid1 and self.driver.filter is None:
            # Its own IPC namespace: whatever is in it is the program's (with the filter,
            # the program can create no SysV object and no key).
            _remove_ipc()
        if self.driver.pid1 and self._network_changed():
            result["network_residue"] = True

    def _network_changed(self) -> bool:
        """Whether the sandbox's network namespace differs from what it was before the first
        case (:meth:`prepare`), so a change no later case undid is reported after each; call
        it once every process of the last case is gone. Conservative: a socket the kernel's
        collector is freeing still counts, and a namespace that cannot be read counts as
        changed."""
        state = _network_state(self.driver.filter is not None)
        return state is None or state != self.network

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
