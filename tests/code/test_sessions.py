"""Code-interpreter sessions, the library alone: real bubblewrap sandboxes, no HTTP."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator, Callable

import pytest

from tribunal.code import CodeConfig
from tribunal.code.sandbox import build_driver_pyc, processes_of_uid
from tribunal.code.seccomp import build_filter
from tribunal.code.session_models import CellRequest, CellResult
from tribunal.code.sessions import SessionHost, SessionLimits
from tribunal.wire.errors import SessionLost, SessionsFull

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

HostFactory = Callable[..., SessionHost]


@pytest.fixture
async def make_host() -> AsyncIterator[HostFactory]:
    """Factory of started-up hosts (limits as keywords); every host is closed after."""
    config = CodeConfig(slots=1)
    driver_pyc = await build_driver_pyc(config.python_path)
    bpf = build_filter()
    hosts: list[SessionHost] = []

    def make(**limits: float) -> SessionHost:
        host = SessionHost(config, SessionLimits(**limits), driver_pyc, bpf)  # type: ignore[arg-type]
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        uids = host.pool.uids
        await host.aclose()
        assert all(processes_of_uid(uid) == [] for uid in uids)


async def run(host: SessionHost, session_id: str, code: str, **options: float) -> CellResult:
    return await host.run(session_id, CellRequest(code=code, **options))  # type: ignore[arg-type]


async def test_state_survives_between_calls(make_host: HostFactory) -> None:
    host = make_host(max_sessions=1)
    session = (await host.create()).session_id
    assert (await run(host, session, "import math\nx = 41")).status == "ok"
    second = await run(host, session, "x += 1\nprint('x is', x)\nmath.sqrt(x * x)")
    assert (second.stdout, second.display) == ("x is 42\n", "42.0")
    failed = await run(host, session, "def f():\n    return 1 / 0\nf()")
    assert failed.status == "error" and failed.error is not None
    assert failed.error.ename == "ZeroDivisionError"
    assert "f()" in failed.error.traceback and "tribunal" not in failed.error.traceback
    assert (await run(host, session, "callable(f), x")).display == "(True, 42)"
    assert (await run(host, session, "_[1] + 1")).display == "43"  # the last display, as a REPL's


async def test_a_cell_past_its_limit_is_interrupted_and_the_state_kept(
    make_host: HostFactory,
) -> None:
    host = make_host(max_sessions=1)
    session = (await host.create()).session_id
    await run(host, session, "kept = 'yes'")
    stopped = await run(host, session, "while True:\n    pass", timeout_s=0.5)
    assert stopped.status == "timeout" and stopped.session_alive
    assert stopped.error is not None and stopped.error.ename == "KeyboardInterrupt"
    assert (await run(host, session, "kept")).display == "'yes'"


async def test_a_cell_that_will_not_stop_or_kills_its_interpreter_ends_the_session(
    make_host: HostFactory,
) -> None:
    host = make_host(max_sessions=2)
    stubborn = (await host.create()).session_id
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    killed = await run(host, stubborn, code, timeout_s=0.3)
    assert killed.status == "timeout" and not killed.session_alive
    with pytest.raises(SessionLost, match="did not stop when interrupted"):
        await run(host, stubborn, "1")
    exiting = (await host.create()).session_id
    crashed = await run(host, exiting, "import os\nprint('bye', flush=True)\nos._exit(3)")
    assert (crashed.status, crashed.exit_code, crashed.stdout) == ("crashed", 3, "bye\n")
    with pytest.raises(SessionLost, match=r"died \(exit 3\)"):
        await run(host, exiting, "1")


async def test_idle_ttl_budget_and_output_cap(make_host: HostFactory) -> None:
    host = make_host(max_sessions=2, idle_ttl_s=30.0, budget_s=1.0, max_output_bytes=1000)
    idle = (await host.create(idle_ttl_s=5.0)).session_id
    await run(host, idle, "a = 1")
    assert host.expire(time.monotonic() + 4.0) == 0
    assert host.expire(time.monotonic() + 6.0) == 1
    with pytest.raises(SessionLost, match="idle for more than its TTL of 5 s"):
        await run(host, idle, "a")
    spender = (await host.create()).session_id
    loud = await run(host, spender, "print('y' * 5000)")
    assert loud.stdout_truncated and len(loud.stdout) == 1000
    spent = await run(host, spender, "import time\ntime.sleep(5)", timeout_s=5.0)
    assert spent.status == "timeout" and spent.budget_left_s == 0.0  # cut at the budget
    with pytest.raises(SessionLost, match="time budget of 1 s is spent"):
        await run(host, spender, "1")


async def test_the_cap_refuses_the_next_session_until_one_ends(make_host: HostFactory) -> None:
    host = make_host(max_sessions=1)
    first = (await host.create()).session_id
    with pytest.raises(SessionsFull) as refused:
        await host.create()
    assert refused.value.retryable and refused.value.retry_after_s
    await host.close(first)
    with pytest.raises(SessionLost, match="closed"):
        await run(host, first, "1")
    assert (await host.create()).session_id != first


async def test_calls_on_one_session_run_in_order(make_host: HostFactory) -> None:
    host = make_host(max_sessions=1)
    session = (await host.create()).session_id
    await run(host, session, "seen = []")
    await asyncio.gather(*(run(host, session, f"seen.append({k})") for k in range(8)))
    assert (await run(host, session, "sorted(seen) == list(range(8))")).display == "True"
