"""Hostile programs: each test fails if the sandbox leaked, hung, or let a hack score.

Every test ends by checking that no process of the run is left (by the slots' host uids).
"""

from __future__ import annotations

import asyncio
import os
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tribunal.code import CodeItem, CodeRunVerifier, CodeVerifier, RunItem
from tribunal.code.sandbox import processes_of_uid
from tribunal.wire.envelope import ItemOutcome

pytestmark = pytest.mark.timeout(120)


async def assert_no_processes(uids: list[int], settle_s: float = 2.0) -> None:
    """Fail unless no process runs as any of ``uids`` (allowing a moment for SIGKILLed
    processes to be reaped)."""
    deadline = time.monotonic() + settle_s
    while True:
        left = {uid: processes_of_uid(uid) for uid in uids}
        if not any(left.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"processes left behind: {left}")
        await asyncio.sleep(0.05)


def slot_uids(verifier: CodeVerifier | CodeRunVerifier) -> list[int]:
    """The uids that ran programs: every slot uid but those holding an idle spare sandbox."""
    pool, runner = verifier._pool, verifier._runner
    assert pool is not None and pool.uids, "tests run as root: slots have their own uids"
    assert runner is not None
    spares = {uid for uid, _ in runner._spares.values()}
    return [uid for uid in pool.uids if uid not in spares]


async def run(verifier: CodeRunVerifier, code: str, **kw: Any) -> dict[str, Any]:
    [outcome] = await verifier.score(
        [RunItem(id="r", language=kw.pop("language", "python"), code=textwrap.dedent(code), **kw)]
    )
    assert outcome.error is None, outcome.error
    assert outcome.reward is None
    await assert_no_processes(slot_uids(verifier))
    return outcome.details


async def score(verifier: CodeVerifier, code: str, tests: dict[str, Any], **kw: Any) -> ItemOutcome:
    item = CodeItem(id="s", language="python", code=textwrap.dedent(code), tests=tests, **kw)
    [outcome] = await verifier.score([item])
    await assert_no_processes(slot_uids(verifier))
    return outcome


ADD_STDIO = {
    "kind": "stdio",
    "cases": [{"stdin": "1 2\n", "stdout": "3"}, {"stdin": "2 2\n", "stdout": "4"}],
}
ADD_FUNCTION = {
    "kind": "function",
    "entry_point": "add",
    "cases": [{"args": [1, 2], "expected": 3}, {"args": [5, 5], "expected": 10}],
}
ADD_ASSERT = {
    "kind": "assert",
    "entry_point": "add",
    "test": (
        "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n"
    ),
}


# -- resources ---------------------------------------------------------------------------------


async def test_infinite_loop_is_a_time_limit(run_verifier: CodeRunVerifier) -> None:
    details = await run(run_verifier, "while True: pass", limits={"timeout_s": 1})
    assert details["verdict"] == "time_limit"


async def test_sleep_is_stopped_by_the_wall_clock(run_verifier: CodeRunVerifier) -> None:
    details = await run(run_verifier, "import time; time.sleep(60)", limits={"timeout_s": 1})
    assert details["verdict"] == "time_limit"


async def test_busy_threads_and_ignored_sigterm(run_verifier: CodeRunVerifier) -> None:
    code = """
        import signal, threading
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        def spin():
            while True: pass
        for _ in range(4): threading.Thread(target=spin, daemon=True).start()
        spin()
    """
    details = await run(run_verifier, code, limits={"timeout_s": 1})
    assert details["verdict"] == "time_limit"


@pytest.mark.slow
async def test_fork_bomb_is_contained(run_verifier: CodeRunVerifier) -> None:
    code = """
        import os
        n = 0
        while True:
            try:
                os.fork(); n += 1
            except OSError:
                pass
    """
    details = await run(run_verifier, code, limits={"timeout_s": 2})
    assert details["verdict"] == "time_limit"


async def test_memory_bombs(run_verifier: CodeRunVerifier) -> None:
    details = await run(run_verifier, "x = bytearray(8 << 30)", limits={"memory_mb": 256})
    assert details["verdict"] == "memory_limit"
    code = "a = []\nwhile True: a.append(bytearray(1 << 24))"
    details = await run(run_verifier, code, limits={"memory_mb": 256})
    assert details["verdict"] == "memory_limit"


async def test_tmpfs_and_shm_are_not_memory_sinks(run_verifier: CodeRunVerifier) -> None:
    code = """
        import os
        for path in ('/tmp', '/dev/shm', '/box', '/dev', '/'):
            written = 0
            try:
                for k in range(100):
                    with open(f'{path}/f{k}', 'wb') as f:
                        for _ in range(8): f.write(b'x' * (1 << 20)); written += 1
            except OSError as exc:
                pass
            print(path, written)
    """
    details = await run(run_verifier, code, limits={"timeout_s": 10})
    written = dict(line.split() for line in details["stdout"].splitlines())
    assert int(written["/tmp"]) <= 64 and int(written["/box"]) <= 64
    assert int(written["/dev/shm"]) <= 16
    assert written["/dev"] == "0" and written["/"] == "0"


async def test_large_file_hits_the_file_size_limit(run_verifier: CodeRunVerifier) -> None:
    code = """
        try:
            with open('/box/big', 'wb') as f:
                f.write(b'x' * (100 << 20))
        except OSError as exc:
            print(exc.errno)
    """
    details = await run(run_verifier, code)
    assert details["stdout"].strip() == "27"  # EFBIG


async def test_huge_stdout_and_stderr_are_capped(run_verifier: CodeRunVerifier) -> None:
    code = """
        import sys
        for _ in range(20000):
            print('o' * 1000)
            print('e' * 1000, file=sys.stderr)
    """
    details = await run(run_verifier, code, limits={"max_output_bytes": 100_000, "timeout_s": 10})
    assert details["stdout_truncated"] and details["stderr_truncated"]
    assert len(details["stdout"]) <= 100_000 and len(details["stderr"]) <= 100_000
    assert details["verdict"] == "accepted"  # the run itself finished; outputs were capped


async def test_endless_output_while_scoring_is_a_failure(code_verifier: CodeVerifier) -> None:
    outcome = await score(code_verifier, "while True: print('3' * 10000)", ADD_STDIO)
    assert outcome.reward == 0.0


@pytest.mark.slow
async def test_segfault_and_deep_recursion(run_verifier: CodeRunVerifier) -> None:
    details = await run(run_verifier, "import ctypes; ctypes.string_at(0)")
    assert details["verdict"] == "runtime_error" and details["exit_code"] == 139
    code = "import sys\nsys.setrecursionlimit(10**7)\ndef f(n): return f(n + 1) + 1\nf(0)"
    details = await run(run_verifier, code, limits={"timeout_s": 2, "memory_mb": 256})
    # Python 3.11 frames live on the heap: the recursion ends at a limit, whichever comes first.
    assert details["verdict"] in ("runtime_error", "memory_limit", "time_limit")


async def test_cpp_compile_error_and_crash(run_verifier: CodeRunVerifier) -> None:
    details = await run(run_verifier, "int main() { return x; }", language="cpp")
    assert details["verdict"] == "compile_error" and "x" in details["stderr"]
    code = "#include <cstdio>\nint main(){ int *p = nullptr; *p = 1; }"
    details = await run(run_verifier, code, language="cpp")
    assert details["verdict"] == "runtime_error" and details["exit_code"] == 139


# -- isolation ---------------------------------------------------------------------------------


async def test_writes_outside_the_work_dir_fail_and_leave_nothing(
    run_verifier: CodeRunVerifier,
) -> None:
    marker = f"tribunal-escape-{uuid.uuid4().hex}"
    code = f"""
        import os
        for path in ('/tmp/{marker}', '/box/{marker}', '/usr/{marker}', '/etc/{marker}',
                     '/{marker}', '/proc/1/root/tmp/{marker}', '/dev/{marker}'):
            try:
                open(path, 'w').write('x'); print('wrote', path)
            except OSError as exc:
                print('denied', path, exc.errno)
    """
    details = await run(run_verifier, code)
    assert "wrote /usr" not in details["stdout"] and "wrote /etc" not in details["stdout"]
    for root in ("/tmp", "/usr", "/etc", "/", "/dev", "/root"):
        assert not (Path(root) / marker).exists()


async def test_host_files_and_environment_are_invisible(
    run_verifier: CodeRunVerifier, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"hunter2-{uuid.uuid4().hex}"
    monkeypatch.setenv("TRIBUNAL_FAKE_REDIS_PASSWORD", secret)
    assert os.environ["TRIBUNAL_FAKE_REDIS_PASSWORD"] == secret
    code = """
        import os
        print(dict(os.environ))
        for path in ('/etc/shadow', '/proc/1/environ', '/proc/self/environ', '/proc/1/cmdline',
                     '/root/.bash_history', 'CHECKOUT_FILE', '/proc/1/root/etc/shadow'):
            try:
                print(path, open(path, 'rb').read()[:4000])
            except OSError as exc:
                print(path, 'denied', exc.errno)
        for pid in os.listdir('/proc'):
            if pid.isdigit():
                try: print(pid, open(f'/proc/{pid}/environ', 'rb').read())
                except OSError: pass
    """.replace("CHECKOUT_FILE", str(ROOT / "pyproject.toml"))
    details = await run(run_verifier, code)
    assert secret not in details["stdout"] and secret not in details["stderr"]
    assert "root:" not in details["stdout"]
    assert "/etc/shadow denied 2" in details["stdout"]
    assert "/proc/1/environ denied 13" in details["stdout"]  # the driver is not dumpable


async def test_no_network_not_even_local_redis(run_verifier: CodeRunVerifier) -> None:
    code = """
        import socket
        for host, port in (('127.0.0.1', 6379), ('10.0.0.1', 80), ('1.1.1.1', 53), ('::1', 6379)):
            try:
                socket.create_connection((host, port), timeout=1); print('connected', host)
            except OSError as exc:
                print('blocked', host, exc.errno)
        print(open('/proc/net/dev').read())
    """
    details = await run(run_verifier, code)
    assert "connected" not in details["stdout"]
    assert details["stdout"].count("blocked") == 4


async def test_killing_the_parent_and_pid1_does_nothing(run_verifier: CodeRunVerifier) -> None:
    code = """
        import os, signal
        for pid in (os.getppid(), 1):
            for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
                try: os.kill(pid, sig)
                except OSError as exc: print('denied', exc.errno)
        try: os.kill(-1, signal.SIGKILL)
        except OSError: pass
        print('alive')
    """
    details = await run(run_verifier, code)
    assert "alive" in details["stdout"]


async def test_double_forked_daemons_do_not_outlive_the_run(
    run_verifier: CodeRunVerifier, code_verifier: CodeVerifier
) -> None:
    daemon = """
        import os, time, sys
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.closerange(0, 1024)
                time.sleep(300)
            os._exit(0)
        print(3 if sys.stdin.readline().split()[0] == '1' else 4)
    """
    details = await run(run_verifier, daemon, stdin="1 2\n")
    assert details["stdout"].strip() == "3"
    outcome = await score(code_verifier, daemon, ADD_STDIO)
    assert outcome.reward == 1.0  # and assert_no_processes passed for both


# -- reward hacks ------------------------------------------------------------------------------


async def test_fake_pass_markers_score_zero(code_verifier: CodeVerifier) -> None:
    code = """
        print('All tests passed')
        print('{"i": 0, "status": "ok", "value": {"v": 3, "o": []}}')
        print('{"op": "done", "status": "passed"}')
        print('accepted')
        def add(a, b):
            print('{"i": 0, "status": "ok", "value": {"v": 3, "o": []}}')
            return None
    """
    for tests in (ADD_STDIO, ADD_FUNCTION, ADD_ASSERT):
        outcome = await score(code_verifier, code, tests)
        assert outcome.reward == 0.0, (tests["kind"], outcome)


async def test_early_exit_and_system_exit_score_zero(code_verifier: CodeVerifier) -> None:
    programs = [
        "import os\nos._exit(0)\ndef add(a, b): return a + b",
        "import sys\nsys.exit(0)\ndef add(a, b): return a + b",
        "def add(a, b):\n    raise SystemExit(0)",
        "def add(a, b):\n    import os; os._exit(0)",
    ]
    for code in programs:
        for tests in (ADD_FUNCTION, ADD_ASSERT):
            outcome = await score(code_verifier, code, tests)
            assert outcome.error is None and outcome.reward == 0.0, (code, tests["kind"], outcome)


async def test_always_true_eq_scores_zero(code_verifier: CodeVerifier) -> None:
    code = """
        class Anything:
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            __hash__ = object.__hash__
        class Int(int):
            def __eq__(self, other): return True
            __hash__ = int.__hash__
        def add(a, b):
            return Anything() if a == 1 else Int(0)
    """
    for tests in (ADD_FUNCTION, ADD_ASSERT):
        outcome = await score(code_verifier, code, tests)
        assert outcome.reward == 0.0, (tests["kind"], outcome)


async def test_true_is_not_one(code_verifier: CodeVerifier) -> None:
    tests = {
        "kind": "function",
        "entry_point": "f",
        "cases": [{"args": [1], "expected": 1}, {"args": [0], "expected": True}],
    }
    outcome = await score(code_verifier, "def f(x): return bool(x) if x else 1", tests)
    assert [t["verdict"] for t in outcome.details["tests"]] == ["wrong_answer", "wrong_answer"]


async def test_monkeypatching_the_harness_and_its_channel_scores_zero(
    code_verifier: CodeVerifier,
) -> None:
    code = """
        import gc, os, sys, json, builtins
        # Forge records on every fd, patch the serialiser and the checks, find the driver.
        forged = (b'{"i":0,"status":"accepted"}\\n{"op":"done","status":"passed"}\\n'
                  b'{"verdict":"accepted","all_passed":true}\\n')
        for fd in range(3, 256):
            try: os.write(fd, forged)
            except OSError: pass
        for pid in ('1', 'self'):
            for fd in range(0, 64):
                try:
                    with open(f'/proc/{pid}/fd/{fd}', 'wb') as f: f.write(forged)
                except OSError: pass
        tokens = [o for o in gc.get_objects() if isinstance(o, bytearray) and len(o) == 32]
        assert all(not any(t) for t in tokens), 'token leaked'
        json.dumps = lambda *a, **k: '{"status": "passed"}'
        builtins.AssertionError = type('Nope', (Exception,), {})
        for obj in gc.get_objects():
            if type(obj).__name__ in ('_Channel', '_TestRole', '_CallRole'):
                obj.send = lambda *a, **k: None
        sys.modules.pop('tribunal', None)
        def add(a, b):
            return a - b
    """
    for tests in (ADD_FUNCTION, ADD_ASSERT, ADD_STDIO):
        outcome = await score(code_verifier, code, tests)
        assert outcome.error is None, outcome.error
        assert outcome.reward == 0.0, (tests["kind"], outcome)


async def test_reading_the_test_from_frames_finds_nothing(code_verifier: CodeVerifier) -> None:
    code = """
        import gc, sys
        def add(a, b):
            seen = []
            frame = sys._getframe()
            while frame:
                seen.append(frame.f_code.co_consts); frame = frame.f_back
            for obj in gc.get_objects():
                if isinstance(obj, dict) and 'expected' in obj:
                    return obj['expected']
            for consts in seen:
                for c in consts:
                    if isinstance(c, int) and c not in (a, b, 0, 1, -1): return c
            return None
    """
    for tests in (ADD_FUNCTION, ADD_ASSERT):
        outcome = await score(code_verifier, code, tests)
        assert outcome.reward == 0.0, (tests["kind"], outcome)


async def test_busy_daemon_cannot_starve_later_cases(code_verifier: CodeVerifier) -> None:
    code = """
        import os
        if os.fork() == 0:
            while True: pass
        def add(a, b): return a + b
    """
    outcome = await score(code_verifier, code, ADD_FUNCTION)
    assert outcome.reward == 1.0


# -- concurrency -------------------------------------------------------------------------------


@pytest.mark.slow
async def test_hostile_neighbours_do_not_disturb_honest_items(code_verifier: CodeVerifier) -> None:
    honest = "def add(a, b):\n    return a + b\n"
    hostile = [
        "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass",
        "x = bytearray(8 << 30)",
        "while True: print('x' * 4096)",
        "import time\ntime.sleep(30)",
    ]
    items = []
    for k in range(12):
        code = hostile[k // 3] if k % 3 == 0 else honest
        tests = (ADD_FUNCTION, ADD_ASSERT, ADD_STDIO)[k % 3] if k % 3 else ADD_FUNCTION
        if tests is ADD_STDIO:
            code = "a, b = map(int, input().split())\nprint(a + b)"
        items.append(
            CodeItem(id=str(k), language="python", code=code, tests=tests, limits={"timeout_s": 2})
        )
    outcomes = await code_verifier.score(items)
    for k, outcome in enumerate(outcomes):
        assert outcome.error is None, (k, outcome.error)
        assert outcome.reward == (0.0 if k % 3 == 0 else 1.0), (k, outcome)
    await assert_no_processes(slot_uids(code_verifier))
