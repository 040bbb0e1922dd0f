"""The second hostile corpus: programs that look for the seams around the comparison.

Each test asserts the verdict a program earns and that it produces no item error: whatever a
program prints, returns, raises or writes into the driver's channels is a verdict of its test,
never an exception in the service, the worker or the driver.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from tests.code.test_hostile import ADD_FUNCTION, ADD_STDIO, run, score
from tribunal.code import CodeConfig, CodeItem, CodeRunVerifier, CodeVerifier, RunItem, sandbox
from tribunal.code import runner as runner_module
from tribunal.code.api import create_app
from tribunal.code.cgroup import MemoryCgroups
from tribunal.code.runner import Runner
from tribunal.code.settings import CodeSettings
from tribunal.core.cache import MemoryCache, cache_entry
from tribunal.core.queue.base import QueuedItem
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.core.worker import WorkerRuntime, result_json
from tribunal.wire import jsonparse
from tribunal.wire.envelope import ItemOutcome, VerifierInfo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

_INFO = VerifierInfo(name="code", version="test", config_hash="0" * 16)


def verdicts(outcome: ItemOutcome) -> list[str]:
    """The per-case verdicts of a scored item that has no error, after checking that its
    result is writable by orjson and by the worker."""
    assert outcome.error is None, outcome.error
    orjson.dumps(outcome.details)
    assert '"error":null' in result_json("x", outcome, _INFO)
    return [case["verdict"] for case in outcome.details["tests"]]


def forged_reply(value_json: str, index: int = 0) -> str:
    """A function that writes its own reply into the worker's reply pipe (fd 4), then hangs."""
    record = '{"i": ' + str(index) + ', "status": "ok", "value": ' + value_json + "}"
    return f"""
        import os, time
        def f(*args):
            os.write(4, {record.encode()!r} + b"\\n")
            time.sleep(30)
    """


ONE_CALL = {"kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": 1.5}]}


# -- class 2: program-controlled bytes ------------------------------------------------------------


async def test_a_huge_integer_against_a_float_is_a_wrong_answer(
    code_verifier: CodeVerifier,
) -> None:
    outcome = await score(code_verifier, "def f(): return 10**400", ONE_CALL)
    assert verdicts(outcome) == ["wrong_answer"]


@pytest.mark.parametrize(
    "value",
    [
        '{"v": 1e999, "o": []}',  # parses to inf in the driver, which writes no NaN
        '{"v": {"$complex": [1e308, -1e999]}, "o": []}',
        '{"v": {"$complex": [' + "9" * 400 + ", 0]}, " + '"o": []}',  # OverflowError decoding
        '{"v": ' + "[" * 500 + "]" * 500 + ', "o": []}',  # deeper than the service would parse
        '{"v": ' + "[" * 5000 + "]" * 5000 + ', "o": []}',  # deeper than the driver parses
        '{"v": {"$nope": 1}, "o": []}',
        '{"v": 1, "o": [{"c": "X", "a": [["x", {"$float": "big"}]]}]}',
        '{"v": 1}',
    ],
)
async def test_forged_replies_in_the_worker_pipe_are_runtime_errors(
    code_verifier: CodeVerifier, value: str
) -> None:
    outcome = await score(code_verifier, forged_reply(value), ONE_CALL)
    [verdict] = verdicts(outcome)
    assert verdict in ("runtime_error", "wrong_answer")


async def test_forged_statuses_cannot_pass_for_the_drivers_own(code_verifier: CodeVerifier) -> None:
    code = """
        import os, time
        def f(*args):
            os.write(4, b'{"i": 0, "status": "crashed", "signal": 1e999, "exit_code": [[[]]]}\\n')
            time.sleep(30)
    """
    outcome = await score(code_verifier, code, ONE_CALL)
    assert verdicts(outcome) == ["runtime_error"]


async def test_nesting_a_program_may_return(code_verifier: CodeVerifier) -> None:
    deep = {"kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": 1}]}
    nested: Any = 1
    for _ in range(40):
        nested = [nested]
    deep["cases"][0]["expected"] = nested
    outcome = await score(
        code_verifier, "def f():\n x = 1\n for _ in range(40): x = [x]\n return x", deep
    )
    assert verdicts(outcome) == ["accepted"]
    outcome = await score(
        code_verifier, "def f():\n x = 1\n for _ in range(300): x = [x]\n return x", deep
    )
    [case] = outcome.details["tests"]
    assert verdicts(outcome) == ["runtime_error"] and "deeply" in case["message"]


LONE = "\\ud800"


@pytest.mark.parametrize(
    "code",
    [
        f"def add(a, b): raise ValueError('{LONE}' * 3)",
        f"def add(a, b): raise type('{LONE}', (Exception,), {{}})('{LONE}')",
        f"class E(Exception):\n    def __str__(self): return '{LONE}'\ndef add(a, b): raise E()",
        f"raise RuntimeError('{LONE}')",  # at load time
        f"def add(a, b):\n    import sys\n    sys.stderr.write('{LONE}')\n    return '{LONE}'",
    ],
)
async def test_lone_surrogates_end_as_verdicts_with_writable_messages(
    code_verifier: CodeVerifier, code: str
) -> None:
    outcome = await score(code_verifier, code, ADD_FUNCTION)
    assert set(verdicts(outcome)) <= {"runtime_error", "wrong_answer"}
    text = orjson.dumps(outcome.details).decode()
    assert "\\\\ud800" in text or "wrong_answer" in text


async def test_lone_surrogates_relayed_to_the_assert_test(code_verifier: CodeVerifier) -> None:
    tests = {
        "kind": "assert",
        "entry_point": "f",
        "test": "def check(candidate):\n    assert candidate() == 'x', candidate()\n",
    }
    outcome = await score(code_verifier, f"def f(): return '{LONE}'", tests)
    assert verdicts(outcome) == ["wrong_answer"]
    # the value itself crosses intact: the test sees the very string the program returned
    tests["test"] = "def check(candidate):\n    assert candidate() == chr(0xD800)\n"
    outcome = await score(code_verifier, f"def f(): return '{LONE}'", tests)
    assert verdicts(outcome) == ["accepted"]


async def test_a_worker_that_exits_between_two_calls_is_a_runtime_error(
    code_verifier: CodeVerifier,
) -> None:
    code = """
        import os, threading
        def f(x):
            threading.Timer(0.05, os._exit, (3,)).start()
            return x
    """
    tests = {
        "kind": "assert",
        "entry_point": "f",
        # the test waits long enough for the worker to exit before its second call, so that
        # the driver reaps it between two commands
        "test": "import time\ndef check(c):\n    assert c(1) == 1\n    time.sleep(1)\n"
        "    assert c(2) == 2\n",
    }
    outcome = await score(code_verifier, code, tests)
    assert verdicts(outcome) == ["runtime_error"]


DEEP_TREE = """
    import os
    dirty = os.listdir('/box') + os.listdir('/tmp') + os.listdir('/dev/shm')
    a, b = map(int, input().split())
    print('dirty' if dirty else a + b)
    os.chdir('/tmp')
    for _ in range(3000):
        os.mkdir('d')
        os.chdir('d')
    open('f', 'w').write('x')
    for _ in range(1500):
        os.chdir('..')
    os.chmod('d', 0)
    os.chdir('/box')
    os.makedirs('a/b/c')
    os.chmod('a/b', 0o100)
    os.chmod('a', 0)
"""


async def test_a_deep_unreadable_tree_is_wiped(
    code_verifier: CodeVerifier, run_verifier: CodeRunVerifier
) -> None:
    outcome = await score(code_verifier, DEEP_TREE, ADD_STDIO)
    assert verdicts(outcome) == ["accepted", "accepted"]
    [run] = await run_verifier.score(
        [RunItem(id="r", language="python", code=textwrap.dedent(DEEP_TREE), stdin="1 2\n")]
    )
    assert run.error is None and run.details["stdout"] == "3\n"


async def test_one_unwritable_result_fails_only_its_item() -> None:
    outcome = ItemOutcome(reward=1.0, details={"message": "\ud800"})
    result = json.loads(result_json("bad", outcome, _INFO))
    assert result["error"]["code"] == "internal_error" and result["reward"] is None


async def test_a_batch_never_pays_for_one_item(
    code_verifier: CodeVerifier, redis_server: Any, key_prefix: str
) -> None:
    """A two-item batch through a real worker and Redis: one item's program raises with a
    lone surrogate in its message (a result nothing could write, before the escape point),
    the other is slow and correct. Each is scored once, the slow one accepted."""
    calls: list[str] = []
    score_item = code_verifier.score_item

    async def counted(item: CodeItem) -> ItemOutcome:
        calls.append(item.id)
        return await score_item(item)

    code_verifier.score_item = counted  # type: ignore[method-assign]
    bad = CodeItem(
        id="bad", language="python", code=f"def add(a, b): raise ValueError('{LONE}')",
        tests=ADD_FUNCTION,
    )  # fmt: skip
    slow = CodeItem(
        id="slow", language="python",
        code="import time\ndef add(a, b):\n    time.sleep(0.4)\n    return a + b",
        tests=ADD_FUNCTION,
    )  # fmt: skip
    queue = RedisStreamsQueue(
        redis_server.url, Keys(key_prefix), max_queue_items=100, result_ttl_s=60,
        visibility_timeout_s=0.3,
    )  # fmt: skip
    await queue.ensure_verifier("code")
    runtime = WorkerRuntime(
        code_verifier, queue, MemoryCache(100, 60), batch_size=2, heartbeat_s=0.1, block_s=0.05
    )
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    try:
        payloads = [item.model_dump(mode="json") for item in (bad, slow)]
        queued = [QueuedItem(i, p, cache_entry("1", "0" * 16, p)) for i, p in enumerate(payloads)]
        job = await queue.submit("code", queued, total=2, prefilled={})
        record = await queue.wait(job.job_id, 60)
        assert record.is_done
        results = [json.loads(record.results[i]) for i in (0, 1)]
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await queue.aclose()
    assert sorted(calls) == ["bad", "slow"], "no item ran twice"
    assert [r["error"] for r in results] == [None, None]
    assert [r["reward"] for r in results] == [0.0, 1.0]
    assert "\\\\ud800" in json.dumps(results[0]["details"])


# -- class 1: no state crosses test cases ---------------------------------------------------------

_LIBC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
# (check: an expression true when the state is there, plant: statements that leave it)
CHANNELS = {
    "file_in_locked_dir": (
        "os.path.exists('/tmp/locked')",
        "os.makedirs('/tmp/locked/in'); open('/tmp/locked/in/f', 'w').write('1');"
        " os.chmod('/tmp/locked/in', 0); os.chmod('/tmp/locked', 0)",
    ),
    "file_in_dev_shm": ("os.path.exists('/dev/shm/n')", "open('/dev/shm/n', 'w').write('1')"),
    "hidden_file_in_box": ("os.path.exists('/box/.n')", "open('/box/.n', 'w').write('1')"),
    "mode_of_tmp": (
        "os.stat('/tmp').st_mode & 0o7777 == 0o1701",
        "os.chmod('/tmp', 0o1701)",
    ),
    "mode_of_box": ("os.stat('/box').st_mode & 0o777 == 0o701", "os.chmod('/box', 0o701)"),
    "xattr_of_tmp": ("'user.n' in os.listxattr('/tmp')", "os.setxattr('/tmp', 'user.n', b'1')"),
    "mtime_of_box": ("os.stat('/box').st_mtime == 12345", "os.utime('/box', (12345, 12345))"),
    "sysv_shm": ("libc.shmget(4242, 0, 0) >= 0", "assert libc.shmget(4242, 4096, 0o1600) >= 0"),
    "sysv_sem": ("libc.semget(4242, 0, 0) >= 0", "assert libc.semget(4242, 1, 0o1600) >= 0"),
    "sysv_msg": ("libc.msgget(4242, 0) >= 0", "assert libc.msgget(4242, 0o1600) >= 0"),
    "posix_mqueue": (
        "libc.mq_open(b'/n', os.O_RDONLY) >= 0",
        "assert libc.mq_open(b'/n', os.O_CREAT | os.O_RDWR, 0o600, None) >= 0",
    ),
    "user_keyring": (
        "libc.syscall(249, b'user', b'n', None, 0) >= 0",  # request_key
        "assert libc.syscall(248, b'user', b'n', b'1', 1, -4) >= 0",  # add_key, user keyring
    ),
    "session_keyring": (
        "libc.syscall(249, b'user', b's', None, 0) >= 0",
        "assert libc.syscall(248, b'user', b's', b'1', 1, -3) >= 0",
    ),
}


def channel_program(check: str, plant: str) -> str:
    """Prints the sum when it finds no state left by an earlier case, then leaves some."""
    return (
        f"import os\n{_LIBC}found = {check}\na, b = map(int, input().split())\n"
        f"print('seen' if found else a + b)\n{plant}\n"
    )


@pytest.mark.parametrize("namespaces", [True, False], ids=["case_namespaces", "cleanup_only"])
@pytest.mark.parametrize("channel", sorted(CHANNELS))
async def test_no_state_crosses_cases(
    channel: str,
    namespaces: bool,
    bare_code_verifier: CodeVerifier,
    bare_run_verifier: CodeRunVerifier,
) -> None:
    """Each channel, with each case in namespaces of its own and (as on a host that refuses
    them) with the per-case clean-up alone."""
    assert bare_code_verifier.case_namespaces, "this host gives each case its namespaces"
    _runner(bare_code_verifier).case_namespaces = namespaces
    check, plant = CHANNELS[channel]
    # The channel exists: within one case, what was planted is found.
    probe = f"import os\n{_LIBC}{plant}\nprint({check})\n"
    [run] = await bare_run_verifier.score([RunItem(id="p", language="python", code=probe)])
    assert run.error is None and run.details["stdout"] == "True\n", run.details
    # And no later case finds it: a program answering from a case counter earns nothing.
    outcome = await score(bare_code_verifier, channel_program(check, plant), ADD_STDIO)
    assert verdicts(outcome) == ["accepted", "accepted"]


def _runner(verifier: CodeVerifier) -> Runner:
    runner = verifier._runner
    assert runner is not None
    return runner


# Values that advanced from one case to the next while the cases of an item shared the
# sandbox's pid namespace and tmpfs (a program could answer by the case index).
_COUNTER_PRELUDE = """
def child_pid():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid

def new_inode(path, make=lambda p: open(p, 'w').close()):
    make(path)
    return os.stat(path).st_ino
"""
COUNTERS = {
    "pid": "os.getpid()",
    "proc_self": "os.readlink('/proc/self')",
    "last_pid_of_loadavg": "open('/proc/loadavg').read().split()[-1]",
    "pid_of_a_child": "child_pid()",
    "inode_in_tmp": "new_inode('/tmp/n')",
    "inode_in_box": "new_inode('/box/n')",
    "inode_in_dev_shm": "new_inode('/dev/shm/n')",
    "inode_of_a_directory": "new_inode('/tmp/d', os.mkdir)",
    "sysv_shm_id": "libc.shmget(0, 4096, 0o1600)",  # IPC_PRIVATE: ids advance with a sequence
    "sysv_sem_id": "libc.semget(0, 1, 0o1600)",
}


async def case_outputs(verifier: CodeVerifier, code: str, cases: int = 3) -> list[str]:
    """The stdout of each of ``cases`` stdio cases of ``code`` in one sandbox, as the
    runner sets them up for a scored item (the verdicts hide the output)."""
    runner = _runner(verifier)
    async with runner._lease() as lease, runner._session(lease, 60) as session:
        setup = runner._stdio_setup(session, "python", code, True, cases)
        await runner._setup(session, setup)
        outputs = []
        for index in range(cases):
            record = await session.request(
                {
                    "op": "case", "i": index, "stdin": "", "timeout_s": 5.0, "memory_mb": 256,
                    "max_output_bytes": 4096,
                },
                15,
            )  # fmt: skip
            assert record["status"] == "exited", record
            outputs.append(base64.b64decode(record["stdout"]).decode().strip())
    return outputs


@pytest.mark.parametrize("counter", sorted(COUNTERS))
async def test_no_counter_tells_cases_apart(
    counter: str, bare_code_verifier: CodeVerifier, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program that answers by a counter is paid for every case while the cases share the
    sandbox's namespaces, and for at most one once each case has its own (seccomp off: the
    SysV ids are a counter where a program may make SysV objects). The cases run in the
    item's own order here: this is the namespaces' test, not the random order's."""
    monkeypatch.setattr(runner_module, "case_order", lambda n: list(range(n)))
    runner = _runner(bare_code_verifier)
    assert bare_code_verifier.case_namespaces, "this host gives each case its namespaces"
    expression = COUNTERS[counter]
    observe = f"import os\n{_LIBC}{_COUNTER_PRELUDE}print({expression})\n"
    abc = {"kind": "stdio", "cases": [{"stdout": answer} for answer in "ABC"]}

    runner.case_namespaces = False  # the cases share the sandbox: the channel exists
    learned = await case_outputs(bare_code_verifier, observe)
    assert len(set(learned)) == 3, learned
    table = dict(zip(learned, "ABC", strict=True))
    cheat = f"import os\n{_LIBC}{_COUNTER_PRELUDE}print({table!r}.get(str({expression}), '?'))\n"
    assert verdicts(await score(bare_code_verifier, cheat, abc)) == ["accepted"] * 3

    runner.case_namespaces = True
    seen = await case_outputs(bare_code_verifier, observe)
    assert len(set(seen)) == 1 and seen[0] not in ("", "-1"), seen
    assert verdicts(await score(bare_code_verifier, cheat, abc)).count("accepted") <= 1


# What the driver holds is in the program's reach: a stdio program's process is a fork of the
# driver (its frames hold the case's command), and a function runs inside the worker's loop
# (whose frame holds the call's request). Both carry ``i``: the case's position in the run.
FRAME_READERS = {
    "stdio": """
import sys
position = None
frame = sys._getframe()
while frame is not None:
    for value in list(frame.f_locals.values()):
        if isinstance(value, dict) and value.get("op") == "case":
            position = value["i"]
    frame = frame.f_back
input()
print("ABCDEFGH"[position])
""",
    "function": """
import sys
def f(x):
    frame = sys._getframe(1)
    while frame is not None:
        request = frame.f_locals.get("request")
        if isinstance(request, dict) and "i" in request:
            return "ABCDEFGH"[request["i"]]
        frame = frame.f_back
""",
}


def _lettered(kind: str, n: int) -> dict[str, Any]:
    """``n`` cases whose answers are A, B, C, ... (each input its own index)."""
    if kind == "stdio":
        return {
            "kind": "stdio",
            "cases": [{"stdin": f"{k}\n", "stdout": "ABCDEFGH"[k]} for k in range(n)],
        }
    cases = [{"args": [k], "expected": "ABCDEFGH"[k]} for k in range(n)]
    return {"kind": "function", "entry_point": "f", "cases": cases}


@pytest.mark.parametrize("kind", sorted(FRAME_READERS))
async def test_the_case_a_program_runs_is_nowhere_in_its_sandbox(
    kind: str, code_verifier: CodeVerifier, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program that reads the driver's frames learns its case's position in the run, and
    nothing more. Run in the item's own order (as every item ran before the order was
    drawn), answering by it is paid for every case, namespaces or not; in another order, for
    none; in the runner's random order, for about one of eight (never all: 1 in 40,320)."""
    code = FRAME_READERS[kind]
    monkeypatch.setattr(runner_module, "case_order", lambda n: list(range(n)))
    assert verdicts(await score(code_verifier, code, _lettered(kind, 3))) == ["accepted"] * 3
    monkeypatch.setattr(runner_module, "case_order", lambda n: [*range(1, n), 0])
    assert verdicts(await score(code_verifier, code, _lettered(kind, 3))).count("accepted") == 0
    monkeypatch.undo()
    drawn = verdicts(await score(code_verifier, code, _lettered(kind, 8)))
    assert drawn.count("accepted") < 8 and set(drawn) <= {"accepted", "wrong_answer"}


@pytest.mark.parametrize("kind", ["stdio", "function"])
async def test_results_come_back_in_the_items_order(kind: str, code_verifier: CodeVerifier) -> None:
    """Whatever order the cases ran in, each verdict is its own case's: a program right on
    case 5 alone is accepted there alone, and with ``stop_on_first_failure`` every case but
    the one that ran first and failed is skipped (or accepted before it)."""
    if kind == "stdio":
        code = "k = int(input())\nprint('F' if k == 5 else '?')\n"
    else:
        code = "def f(k):\n    return 'F' if k == 5 else '?'\n"
    outcome = await score(code_verifier, code, _lettered(kind, 8))
    assert verdicts(outcome) == ["wrong_answer"] * 5 + ["accepted"] + ["wrong_answer"] * 2
    assert [case["index"] for case in outcome.details["tests"]] == list(range(8))
    stopped = verdicts(
        await score(
            code_verifier, code, _lettered(kind, 8), options={"stop_on_first_failure": True}
        )
    )
    assert stopped.count("wrong_answer") == 1 and stopped.count("skipped") >= 6, stopped


async def test_a_host_that_refuses_case_namespaces_falls_back_to_the_cleanup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without ``CAP_SYS_ADMIN`` for the driver (a setuid bwrap), the start-up probe finds
    that cases share the sandbox's namespaces, says so in the layers, and items score."""
    monkeypatch.setattr(sandbox, "_capabilities", lambda path: ("--cap-drop", "ALL"))
    verifier = CodeVerifier(CodeConfig(slots=1, default_timeout_s=3.0))
    await verifier.start()
    try:
        assert verifier.layers["case_namespaces"] is False
        program = "a, b = map(int, input().split())\nprint(a + b)\n"
        assert verdicts(await score(verifier, program, ADD_STDIO)) == ["accepted"] * 2
    finally:
        await verifier.aclose()


async def test_case_namespaces_can_be_turned_off() -> None:
    """``TRIBUNAL_CODE_CASE_NAMESPACES=false``: no probe, the per-case clean-up alone, said in
    the layers, and the configuration hashes apart from the default's (which did not move)."""
    config = CodeConfig(slots=1, default_timeout_s=3.0, case_namespaces=False)
    verifier = CodeVerifier(config)
    await verifier.start()
    try:
        assert verifier.layers["case_namespaces"] is False
        assert _runner(verifier).case_namespaces is False
        program = "a, b = map(int, input().split())\nprint(a + b)\n"
        assert verdicts(await score(verifier, program, ADD_STDIO)) == ["accepted"] * 2
    finally:
        await verifier.aclose()
    assert verifier.config_hash() != CodeVerifier(CodeConfig()).config_hash()


# -- class 3: the service does not do the program's work ------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        # a set of 60,000 integers of one hash, written straight into the reply pipe (building
        # it in the program would cost the program what it costs a decoder)
        'os.write(4, (\'{"i":0,"status":"ok","value":{"v":{"$set":[\''
        " + ','.join(str(k * (2**61 - 1)) for k in range(60000)) + ']},\"o\":[]}}\\n')"
        ".encode()); time.sleep(30)",
        "return [type(f'C{k}', (), {})() for k in range(20000)]",  # one class per object
        "return [1] * 200000",
    ],
)
async def test_large_hostile_replies_are_wrong_answers(
    code_verifier: CodeVerifier, body: str
) -> None:
    tests = {"kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": [1]}]}
    limits = {"max_output_bytes": 4 << 20, "timeout_s": 10}
    code = f"import os, time\ndef f():\n    {body}\n"
    outcome = await score(code_verifier, code, tests, limits=limits)
    assert verdicts(outcome) == ["wrong_answer"]


async def test_a_large_reply_is_compared_by_its_bytes(
    code_verifier: CodeVerifier, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Return values of 100,000 integers (590 kB): the equal one is accepted, one integer off
    or a bool for an int is a wrong answer, all three without parsing the reply; a tuple of
    the same integers is parsed and walked, and accepted."""
    parsed: list[int] = []
    real = jsonparse.loads

    def loads(data: bytes) -> Any:
        if len(data) > 100_000:  # a reply, not a record
            parsed.append(len(data))
        return real(data)

    monkeypatch.setattr(jsonparse, "loads", loads)
    expected = list(range(100_000))
    cases = [{"args": [k], "expected": expected} for k in range(4)]
    tests = {"kind": "function", "entry_point": "f", "cases": cases}
    code = """
        def f(k):
            v = list(range(100_000))
            if k == 1:
                v[-1] += 1
            if k == 2:
                v[5] = True
            return tuple(v) if k == 3 else v
    """
    outcome = await score(code_verifier, code, tests)
    assert verdicts(outcome) == ["accepted", "wrong_answer", "wrong_answer", "accepted"]
    assert len(parsed) == 1


async def test_a_return_value_that_looks_like_records_is_data(code_verifier: CodeVerifier) -> None:
    """The value's length is the driver's, counted from the bytes it writes: text that looks
    like a record, a length or a newline in a returned string moves no frame of the channel."""
    fake = "\n" + "0" * 64 + ' {"i": 1, "status": "ok", "value_bytes": 2}\n[]'
    cases = [{"args": [0], "expected": fake}, {"args": [1], "expected": 1}]
    tests = {"kind": "function", "entry_point": "f", "cases": cases}
    code = f"def f(k):\n    return {fake!r} if k == 0 else 1\n"
    outcome = await score(code_verifier, code, tests)
    assert verdicts(outcome) == ["accepted", "accepted"]


async def test_a_reply_the_driver_writes_longer_than_the_cap_is_an_output_limit(
    code_verifier: CodeVerifier,
) -> None:
    """The driver writes the value it passes on itself: "1E15" becomes 1000000000000000.0,
    3.8 times as long. The cap holds for what it sends."""
    value = '{"v": [' + ",".join(["1E15"] * 20_000) + '], "o": []}'
    limits = {"max_output_bytes": 100_000}
    outcome = await score(code_verifier, forged_reply(value), ONE_CALL, limits=limits)
    [case] = outcome.details["tests"]
    assert verdicts(outcome) == ["runtime_error"] and "output limit" in case["message"]


# -- classes 4 and 5: memory outside the limits, kernel surface -----------------------------------


@pytest.fixture
async def small_bare_verifier() -> AsyncIterator[CodeVerifier]:
    """Seccomp off (memfd and SysV memory allowed), small limits: each sandbox's memory
    cgroup holds (256 + 256) MiB of processes and 144 MiB of tmpfs."""
    config = CodeConfig(
        slots=1, default_timeout_s=20.0, seccomp=False, max_memory_mb=256,
        compile_memory_mb=256, default_memory_mb=128,
    )  # fmt: skip
    verifier = CodeVerifier(config)
    await verifier.start()
    yield verifier
    await verifier.aclose()


HOARDERS = {
    # 1 GiB in memfd files written, never mapped: no address space, no RSS (68 files of 15
    # MiB: RLIMIT_FSIZE caps each file at 16)
    "memfd": (
        "fds = [os.memfd_create('m') for _ in range(68)]\n"
        "for fd in fds:\n    os.write(fd, b'x' * (15 << 20))\n"
    ),
    # 1 GiB of SysV segments, each attached, filled and detached in turn (64 MiB of address
    # space at a time)
    "sysv_shm": (
        "libc.shmat.restype = ctypes.c_void_p\n"
        "for _ in range(16):\n"
        "    shm = libc.shmget(0, 64 << 20, 0o1600)\n"
        "    address = libc.shmat(shm, None, 0)\n"
        "    ctypes.memset(address, 1, 64 << 20)\n"
        "    libc.shmdt(ctypes.c_void_p(address))\n"
    ),
}


@pytest.mark.parametrize("hoard", sorted(HOARDERS))
async def test_memory_no_rlimit_counts_is_stopped_by_the_cgroup(
    hoard: str, small_bare_verifier: CodeVerifier
) -> None:
    """A program that holds 1 GiB its rlimits do not count, beyond its sandbox's whole
    memory, is killed by the sandbox's memory cgroup: ``memory_limit``, not an item error
    (the driver is never the OOM killer's choice)."""
    cgroups = MemoryCgroups.detect()
    if cgroups.version is None:
        pytest.skip(f"no memory cgroup on this host: {cgroups.reason}")
    assert small_bare_verifier.layers["memory_cgroup"] == f"v{cgroups.version}"
    program = f"import os\n{_LIBC}{HOARDERS[hoard]}a, b = map(int, input().split())\nprint(a + b)\n"
    outcome = await score(small_bare_verifier, program, ADD_STDIO)
    assert verdicts(outcome) == ["memory_limit", "memory_limit"], outcome.details
    # The same program within the limit passes: the verdict is the hoard's.
    modest = program.replace("range(68)", "range(4)").replace("range(16)", "range(1)")
    assert verdicts(await score(small_bare_verifier, modest, ADD_STDIO)) == ["accepted"] * 2


async def test_a_run_that_passes_its_cgroup_is_a_memory_limit() -> None:
    """``/v1/code/run`` says ``memory_limit`` too (not the time limit a SIGKILL means
    elsewhere)."""
    cgroups = MemoryCgroups.detect()
    if cgroups.version is None:
        pytest.skip(f"no memory cgroup on this host: {cgroups.reason}")
    config = CodeConfig(
        slots=1, default_timeout_s=20.0, seccomp=False, max_memory_mb=256,
        compile_memory_mb=256, default_memory_mb=128,
    )  # fmt: skip
    verifier = CodeRunVerifier(config)
    await verifier.start()
    try:
        details = await run(verifier, f"import os\n{_LIBC}{HOARDERS['memfd']}print('held')\n")
    finally:
        await verifier.aclose()
    assert details["verdict"] == "memory_limit" and "held" not in details["stdout"], details


# x86_64 numbers of the calls the filter refuses (with the arguments each is tried with)
SYSCALLS = {
    "shmget": (29, 0, 1 << 30, 0o1600),  # 1 GiB of SysV memory, IPC_PRIVATE | IPC_CREAT
    "shmat": (30, 0, 0, 0),
    "shmctl": (31, 0, 0, 0),
    "semget": (64, 0, 1, 0o1600),
    "msgget": (68, 0, 0o1600),
    "memfd_create": (319, b"m", 0),
    "memfd_secret": (447, 0),
    "mq_open": (240, b"q", 0o100 | 2, 0o600, 0),
    "io_uring_setup": (425, 8, None),
    "io_uring_enter": (426, 0, 0, 0, 0, 0, 0),
    "io_uring_register": (427, 0, 0, 0, 0),
    "add_key": (248, b"user", b"k", b"v", 1, -4),
    "request_key": (249, b"user", b"k", None, 0),
    "keyctl": (250, 0, -4, 0),
    "bpf": (321, 0, 0, 0),
    "userfaultfd": (323, 0),
    "perf_event_open": (298, 0, 0, -1, -1, 0),
    "ptrace": (101, 0, 0, 0, 0),  # PTRACE_TRACEME
    "process_vm_readv": (310, 1, 0, 0, 0, 0, 0),
    "process_vm_writev": (311, 1, 0, 0, 0, 0, 0),
    "kcmp": (312, 1, 1, 0, 0, 0),
    "pidfd_getfd": (438, 0, 0, 0),
    "socket_inet": (41, 2, 1, 0),
    "socket_inet6": (41, 10, 2, 0),
    "socket_vsock": (41, 40, 1, 0),
    "socket_netlink": (41, 16, 3, 0),
    "socketpair_inet": (53, 2, 1, 0, None),
}
SYSCALL_PROGRAM = """
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
out = {}
for name, (nr, *args) in CALLS.items():
    ctypes.set_errno(0)
    fds = (ctypes.c_int * 2)()
    args = [fds if name.startswith('socketpair') and a is None else a for a in args]
    rc = libc.syscall(nr, *args)
    out[name] = 'ok' if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')
fds = (ctypes.c_int * 2)()
out['socket_unix'] = 'ok' if libc.syscall(41, 1, 1, 0) >= 0 else 'refused'
out['socketpair_unix'] = 'ok' if libc.syscall(53, 1, 1, 0, fds) >= 0 else 'refused'
print(json.dumps(out))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86_64 system call numbers")
async def test_the_filter_refuses_each_call(
    run_verifier: CodeRunVerifier, bare_run_verifier: CodeRunVerifier
) -> None:
    program = f"CALLS = {SYSCALLS!r}\n{SYSCALL_PROGRAM}"
    item = RunItem(id="s", language="python", code=program, limits={"memory_mb": 256})
    [filtered] = await run_verifier.score([item])
    got = json.loads(filtered.details["stdout"])
    assert got.pop("socket_unix") == "ok" and got.pop("socketpair_unix") == "ok"
    want = {name: "EAFNOSUPPORT" if "socket" in name else "EPERM" for name in SYSCALLS}
    assert got == want
    # Without the filter, what it refuses works here (the test can fail): memory outside the
    # limits, keyrings, vsock's family...
    [bare] = await bare_run_verifier.score([item])
    got = json.loads(bare.details["stdout"])
    assert got["shmget"] == got["memfd_create"] == got["add_key"] == got["socket_inet"] == "ok"


async def test_the_filter_leaves_what_programs_use(run_verifier: CodeRunVerifier) -> None:
    code = """
        import multiprocessing, socket, subprocess, threading, asyncio, tempfile
        a, b = socket.socketpair()
        a.send(b'x'); assert b.recv(1) == b'x'
        with multiprocessing.Pool(2) as pool:
            assert pool.map(abs, [-1, -2]) == [1, 2]
        assert subprocess.run(['true']).returncode == 0
        asyncio.run(asyncio.sleep(0))
        tempfile.TemporaryFile().write(b'x')
        try:
            socket.socket()
        except OSError as exc:
            print(exc.errno)
    """
    details = await run(run_verifier, code, limits={"timeout_s": 10})
    assert details["verdict"] == "accepted", details["stderr"]
    assert details["stdout"] == "97\n"  # EAFNOSUPPORT


async def test_readyz_says_which_layers_are_active() -> None:
    app = create_app(CodeSettings(queue="memory"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            checks = (await client.get("/readyz")).json()["checks"]
    for name in ("code", "code_run"):
        layers = checks[f"layers.{name}"]
        assert layers["namespaces"] == "bwrap" and layers["seccomp"] is True
        assert layers["case_namespaces"] is True
        cgroups = MemoryCgroups.detect()
        expected = False if cgroups.version is None else f"v{cgroups.version}"
        assert layers["memory_cgroup"] == expected


FUZZ = r"""
import os, random

NUMBERS = ["0", "-1", str(2**63), str(10**30), "1e999", "-1e999", "NaN", "Infinity", "1e-400"]
STRINGS = [r'"\ud800"', r'"\udfff\ud800"', r'"\u0000"', r'"\""', '""', '"' + "x" * 50 + '"']
TAGS = ["$tuple", "$set", "$dict", "$complex", "$opaque", "$float", "$ref", "$x", "v"]


def junk(rng, depth=0):
    pick = rng.randrange(12 if depth < 6 else 5)
    if pick == 0:
        return rng.choice(NUMBERS)
    if pick == 1:
        return rng.choice(STRINGS)
    if pick == 2:
        return rng.choice(["true", "false", "null", '{"$ref": 99}', '{"$bytes": "!!"}'])
    if pick == 3:
        return '"' + bytes(rng.randrange(256) for _ in range(8)).hex() + '"'
    if pick == 4:
        return '{"$range": [1, 2]}'
    if pick < 8:
        return "[" + ",".join(junk(rng, depth + 1) for _ in range(rng.randrange(4))) + "]"
    return '{"' + rng.choice(TAGS) + '": ' + junk(rng, depth + 1) + "}"


def f(seed):
    rng = random.Random(seed)
    objects = rng.choice(["[]", junk(rng), '[{"c": "X", "a": [["x", ' + junk(rng) + "]]}]"])
    value = '{"v": ' + junk(rng) + ', "o": ' + objects + "}"
    kind = rng.randrange(6)
    if kind == 0:
        line = '{"i": 0, "status": "ok", "value": ' + value + "}"
    elif kind == 1:
        line = '{"i": ' + junk(rng) + ', "status": ' + junk(rng) + ', "msg": ' + junk(rng) + "}"
    elif kind == 2:
        line = '{"i": 0, "status": "raised", "exc": ' + junk(rng) + ', "msg": ' + junk(rng) + "}"
    elif kind == 3:
        line = junk(rng)
    elif kind == 4:
        line = "[" * rng.randrange(50, 5000)
    else:
        line = bytes(rng.randrange(256) for _ in range(64)).decode("latin-1")
    os.write(4, line.encode("utf-8", "surrogatepass") + b"\n")
    return seed
"""


async def test_any_bytes_in_the_reply_pipe_end_as_verdicts(code_verifier: CodeVerifier) -> None:
    """Forty cases, each writing a random line into the worker's reply pipe before its own
    reply (which then answers the wrong call): every case gets a verdict, none an error."""
    cases = [{"args": [seed], "expected": seed} for seed in range(40)]
    tests = {"kind": "function", "entry_point": "f", "cases": cases}
    outcome = await score(code_verifier, FUZZ, tests, limits={"timeout_s": 5})
    got = verdicts(outcome)
    assert len(got) == 40 and set(got) <= {"runtime_error", "wrong_answer", "accepted"}


HIJACK = (
    FUZZ.replace("def f(seed):", "def forged(seed):").replace(
        '    os.write(4, line.encode("utf-8", "surrogatepass") + b"\\n")\n    return seed',
        "    return line",
    )
    + r"""
import sys, json


def f(seed):
    # Take the worker over: answer this call and every later one with a forged line that
    # carries the index the driver expects.
    frame = sys._getframe(1)
    reader, index = frame.f_locals["reader"], frame.f_locals["request"]["i"]
    while True:
        line = forged(seed).replace('"i": 0', '"i": %d' % index, 1)
        os.write(4, line.encode("utf-8", "surrogatepass") + b"\n")
        request = json.loads(reader.readline())
        index, seed = request["i"], seed + 1
"""
)


@pytest.mark.parametrize("offset", [0, 1000])
async def test_a_program_that_takes_its_worker_over_gets_verdicts(
    code_verifier: CodeVerifier, offset: int
) -> None:
    """The program answers every call itself (valid indexes, random values and statuses),
    in function mode and relayed to an assert test: verdicts, never an item error."""
    assert "def forged(seed)" in HIJACK and "return line" in HIJACK
    calls = "".join(f"    try:\n        c({offset + s})\n    except Exception:\n        pass\n"
                    for s in range(30))  # fmt: skip
    assert_tests = {"kind": "assert", "entry_point": "f", "test": f"def check(c):\n{calls}"}
    cases = [{"args": [offset + s], "expected": offset + s} for s in range(30)]
    function_tests = {"kind": "function", "entry_point": "f", "cases": cases}
    for tests in (assert_tests, function_tests):
        outcome = await score(code_verifier, HIJACK, tests, limits={"timeout_s": 5})
        assert set(verdicts(outcome)) <= {"runtime_error", "wrong_answer", "accepted"}
