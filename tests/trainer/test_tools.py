"""``CodeRunner``: what a tool turn shows of a run on the real code service (API, worker,
Redis and bubblewrap sandboxes as real processes), and of a call that fails."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Callable

import pytest

from tests.conftest import RedisServer, RunningService, free_port, redis_env
from tribunal.trainer.tools import CodeRunner

pytestmark = pytest.mark.e2e


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_a_tool_turn_shows_the_run_or_why_there_is_none(
    request: pytest.FixtureRequest,
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
) -> None:
    code = service("code", env=redis_env(redis_server, key_prefix, TRIBUNAL_CODE_SLOTS="2"))
    runner = CodeRunner(code.base_url, max_output_chars=50)
    slow = CodeRunner(code.base_url, timeout_s=1.0)
    elsewhere = CodeRunner(f"{code.base_url}/not-the-code-service")
    for each in (runner, slow, elsewhere):
        request.addfinalizer(each.close)

    assert runner.run("print(6 * 7)") == "42"
    assert runner.run("import sys\nprint('half', end='')\nsys.exit('boom')") == "half\nboom"
    assert runner.run("import os\nos.abort()") == "error: runtime_error"  # no output: verdict
    assert runner.run("print('a' * 500)") == "a" * 50
    # the HTTP timeout is the tool call's, whatever the sandbox would allow
    assert slow.run("import time\ntime.sleep(3)") == (
        "error: the code interpreter is unavailable (ReadTimeout)"
    )
    assert elsewhere.run("print(1)") == "error: the code interpreter answered 404"


def test_a_failed_call_is_a_tool_turn_at_once_not_an_exception() -> None:
    # A listener that counts connections and drops each one unanswered: with the client's
    # retries the tool call would connect again (and back off for seconds) before answering.
    connections: list[socket.socket] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def drop_each() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            connections.append(conn)
            conn.close()

    dropper = threading.Thread(target=drop_each, daemon=True)
    dropper.start()
    runner = CodeRunner(f"http://127.0.0.1:{free_port()}")
    dropped = CodeRunner(f"http://127.0.0.1:{listener.getsockname()[1]}")
    try:
        down = runner.run("print(1)")
        cut = dropped.run("print(1)")
        # refused before sending (else it would say the service is unavailable)
        surrogate = runner.run("print(1)  # \ud800")
    finally:
        stop.set()
        dropper.join()
        listener.close()
        runner.close()
        dropped.close()
    assert down == "error: the code interpreter is unavailable (ConnectError)"
    assert cut.startswith("error: the code interpreter is unavailable (")
    assert len(connections) == 1  # one attempt, no retry
    assert surrogate.startswith("error: the code interpreter refused the code (")
    assert "lone surrogate" in surrogate
