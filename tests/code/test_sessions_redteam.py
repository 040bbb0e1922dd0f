"""Red team of code-interpreter sessions: two sessions of one worker attack each other.

Each attack is run by session B against session A (which holds a secret in its files, its
kernel objects and its interpreter); A must keep everything, B must see nothing of it.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator

import pytest

from tribunal.code import CodeConfig
from tribunal.code.sandbox import build_driver_pyc, processes_of_uid
from tribunal.code.seccomp import build_filter
from tribunal.code.session_models import CellRequest, CellResult
from tribunal.code.sessions import SessionHost, SessionLimits

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

SECRET = "s3cr3t-of-a"

PLANT = f"""
import os, socket
secret = {SECRET!r}
for path in ('/tmp/a-secret', '/box/a-secret', '/dev/shm/a-secret'):
    with open(path, 'w') as f:
        f.write(secret)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind('\\0tribunal-a')
listener.listen(1)
os.getpid(), os.getuid()
"""

ATTACKS = {
    "files": (
        "import glob\n"
        "found = []\n"
        "for pattern in ('/tmp/*', '/box/*', '/dev/shm/*', '/proc/*/root/tmp/*'):\n"
        "    found += glob.glob(pattern)\n"
        "found"
    ),
    "processes": (
        "import os\n"
        "pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        "killed = []\n"
        "for pid in range(2, 4096):\n"
        "    if pid != os.getpid():\n"
        "        try:\n"
        "            os.kill(pid, 9)\n"
        "            killed.append(pid)\n"
        "        except OSError:\n"
        "            pass\n"
        "pids, killed"
    ),
    "abstract_socket": (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "try:\n"
        "    s.connect('\\0tribunal-a')\n"
        "    reached = True\n"
        "except OSError:\n"
        "    reached = False\n"
        "reached"
    ),
    "interpreter_objects": "'secret' in globals(), 'listener' in dir()",
    "memory_of_a": (
        "import os\n"
        "hits = []\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit() and int(pid) != os.getpid():\n"
        "        try:\n"
        "            with open(f'/proc/{pid}/environ', 'rb') as f:\n"
        "                hits.append(f.read())\n"
        "        except OSError:\n"
        "            pass\n"
        f"any({SECRET!r}.encode() in h for h in hits)"
    ),
}
"""B's attacks, each a cell, and what it must answer (below)."""

EXPECTED = {
    "files": "[]",
    "abstract_socket": "False",
    "interpreter_objects": "(False, False)",
    "memory_of_a": "False",
}


@pytest.fixture
async def host() -> AsyncIterator[SessionHost]:
    config = CodeConfig(slots=1)
    host = SessionHost(
        config,
        SessionLimits(max_sessions=2, call_timeout_s=5.0),
        await build_driver_pyc(config.python_path),
        build_filter(),
    )
    yield host
    uids = host.pool.uids
    await host.aclose()
    assert all(processes_of_uid(uid) == [] for uid in uids)


async def cell(host: SessionHost, session_id: str, code: str, timeout_s: float = 5.0) -> CellResult:
    result = await host.run(session_id, CellRequest(code=code, timeout_s=timeout_s))
    assert result.status == "ok", result
    return result


async def test_a_session_cannot_reach_another(host: SessionHost) -> None:
    a = (await host.create()).session_id
    b = (await host.create()).session_id
    planted = await cell(host, a, PLANT)
    b_identity = await cell(host, b, "import os\nos.getpid(), os.getuid()")
    assert planted.display is not None and b_identity.display is not None
    a_pid, a_uid = eval(planted.display)
    b_pid, b_uid = eval(b_identity.display)
    assert a_uid != b_uid  # a host uid each: processes, rlimits and sweeps are apart
    assert a_pid == b_pid  # each its own pid namespace: the same pid, different processes
    for name, code in ATTACKS.items():
        answer = await cell(host, b, code)
        if name == "processes":
            pids, killed = eval(str(answer.display))
            assert pids == [1, b_pid] and killed == [], answer  # only B's own two processes
        else:
            assert answer.display == EXPECTED[name], (name, answer)
    kept = await cell(host, a, "open('/tmp/a-secret').read() + open('/dev/shm/a-secret').read()")
    assert kept.display == repr(SECRET * 2)
    assert (await cell(host, a, "secret")).display == repr(SECRET)


async def test_a_busy_session_does_not_hold_another_back(host: SessionHost) -> None:
    """A spins through its whole call while B's calls are answered: B's answers all come
    before A's (order, not wall time)."""
    a = (await host.create()).session_id
    b = (await host.create()).session_id
    finished: list[str] = []

    async def spin() -> None:
        result = await host.run(a, CellRequest(code="while True:\n    pass", timeout_s=1.5))
        assert result.status == "timeout" and result.session_alive
        finished.append("a")

    async def calls() -> None:
        for k in range(5):
            assert (await cell(host, b, f"{k} * 2")).display == str(k * 2)
        finished.append("b")

    await asyncio.gather(spin(), calls())
    assert finished == ["b", "a"]


async def test_a_fork_bomb_stays_in_its_session(host: SessionHost) -> None:
    a = (await host.create()).session_id
    b = (await host.create()).session_id
    bomb = (
        "import os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
        "            import time\n            time.sleep(60)\n            os._exit(0)\n"
        "        n += 1\nexcept OSError:\n    pass\nn > 0"
    )
    assert (await cell(host, a, bomb)).display == "True"
    forked = "import subprocess\nsubprocess.run(['/bin/true']).returncode"
    assert (await cell(host, b, forked)).display == "0"
