"""The in-sandbox driver (stdio, function-call and test roles).

Run inside a sandbox, as one unit with the modules before it in ``sandbox._SHIPPED`` (see
``sandbox.driver_source``: ``python3 -I -S <that unit, compiled> <result_fd> <pid1>``), it is
trusted code that starts before any untrusted code and keeps the only handle on the result
channel. The messages are typed in ``protocol.py``. This module is the entry point (the role
dispatch); the unit's parts, in order: ``protocol.py`` and ``codec.py`` (the wire),
``driver_channel.py`` (the channels), ``driver_confine.py`` (rlimits, seccomp, wiping,
capabilities, case namespaces), ``driver_base.py`` (the state the roles share), then one
module per role: ``interp_role.py``, ``stdio_role.py``, ``call_role.py``, ``check_role.py``
(the ``test`` role).

Channels (all pipes, opened by the service before the sandbox starts):

* fd 0, commands: first 32 raw bytes are a per-run random token, then one JSON object per line.
* ``result_fd``, records: ``<token> <json>\\n``, a call's return value after its record as the
  bytes of its JSON (the record says how many). The driver is the only process that holds it:
  every child it forks closes it and zeroes the token (kept in one bytearray, never copied
  into a ``bytes``) before any untrusted code runs, and the driver makes itself non-dumpable,
  so neither ``/proc/1/fd``, ``/proc/1/mem`` nor ``ptrace`` reach it from its children.
* fd 1 / fd 2: the driver's own diagnostics (capped by the service; never parsed).

Roles (the first command's ``role``):

* ``stdio``: for each ``case`` command fork a fresh process (Python: a fork of this warm
  interpreter that runs the code as ``__main__``; C++: exec of the compiled binary), feed its
  stdin from a memfd, capture stdout/stderr with caps, enforce the wall-clock limit, kill every
  other process of the sandbox and wipe the writable directories; report raw bytes and status.
  Comparison happens in the service.
* ``call``: keep one worker process that loaded the solution and answers ``call`` commands
  (``target`` like ``add`` or ``Solution().twoSum``, encoded args) with encoded return values.
  The worker is restarted after a crash or timeout. Values cross as tagged JSON (never pickle),
  so an object whose ``__eq__`` always says True arrives as plain data.
* ``interp``: one long-lived interpreter that runs cells in one namespace (a code-interpreter
  session, ``interp_role.py``).
* ``test``: runs a trusted ``check(candidate)`` (HumanEval / MBPP style) in a sandbox that holds
  no untrusted code; ``candidate`` (and the entry point's name, where the test uses it) is a
  proxy whose calls the service relays to a ``call`` sandbox. The program never sees the test,
  so it can neither read expected values nor patch the assertions. Nothing else is taken from
  the program: a helper the test calls (a prompt's ``encode_cyclic``) would be the program's
  own version, handed the expected values; the test brings its own, and a name it neither
  defines nor imports makes it unusable (``bad_test``).

The driver is pid 1 of its pid namespace (``bwrap --as-pid-1``): signals from inside the
sandbox without a handler are ignored by the kernel, so the program cannot kill it.
"""

from __future__ import annotations

# Only cheap C modules at import time in every part of the unit: the driver starts once per
# sandbox, and ``json``, ``base64``, ``signal`` and ``typing`` would pull in ``re`` and ``enum``
# (about 15 ms). ``resource`` is loaded at import (``driver_confine.py``) rather than in each
# forked child, which would load it anew for every test case (0.3 ms of CPU each).
import _signal as signal
import binascii
import os
import sys

from tribunal.code.call_role import _CallRole
from tribunal.code.check_role import _TestRole
from tribunal.code.driver_base import _Driver
from tribunal.code.driver_channel import _Channel, _LineReader, _read_exact_into
from tribunal.code.driver_confine import _drop_capabilities, _Filter, _make_undumpable
from tribunal.code.interp_role import InterpRole
from tribunal.code.protocol import TOKEN_BYTES, loads
from tribunal.code.stdio_role import _StdioRole


def main() -> None:
    """Run the driver: token, setup command, then the role's command loop."""
    result_fd = int(sys.argv[1])
    pid1 = sys.argv[2] == "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.set_inheritable(result_fd, False)
    _make_undumpable()
    token = bytearray(TOKEN_BYTES)
    _read_exact_into(0, token)
    chan = _Channel(result_fd, token)
    commands = _LineReader(0)
    driver = _Driver(chan, commands, pid1)
    first = commands.readline()
    if first is None:
        return
    setup = loads(first)
    if setup.get("seccomp"):
        driver.filter = _Filter(binascii.a2b_base64(setup["seccomp"]))
    if setup.get("program_oom_score_adj") is not None:
        driver.program_oom_score_adj = int(setup["program_oom_score_adj"])
    for path in setup.get("sys_path", ()):
        if os.path.isdir(path) and path not in sys.path:
            sys.path.append(path)
    role = setup["role"]
    if role == "test":
        _drop_capabilities()
        chan.send(_TestRole(driver, setup).run())
        return
    handler: _StdioRole | _CallRole | InterpRole = (
        _StdioRole(driver, setup)
        if role == "stdio"
        else InterpRole(driver, setup)
        if role == "interp"
        else _CallRole(driver, setup)
    )
    if not isinstance(handler, _StdioRole) or handler.namespaces is None:
        _drop_capabilities()  # only the case namespaces need them
    chan.send(handler.prepare())
    while True:
        line = commands.readline()
        if line is None:
            break
        command = loads(line)
        if command.get("op") == "exit":
            break
        driver.reap()
        if isinstance(handler, _StdioRole):
            chan.send(handler.run_case(command))
        else:
            chan.send(*handler.call(command))
    driver.kill_others()


if __name__ == "__main__":
    main()
