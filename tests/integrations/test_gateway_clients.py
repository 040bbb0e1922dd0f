"""The adapters keep one gateway client per event loop (issue 20's follow-up): TRL's
``remote_reward`` and verl's ``compute_score`` reuse one connection across calls on a loop,
each thread's loop has its own, the sync twins keep a loop per thread, and every connection is
closed with its loop or at exit, without a ResourceWarning.

Connections are counted by a TCP proxy in front of a real gateway (in front of a real math
service): what it counts is what the client opened and closed, not what the code says."""

from __future__ import annotations

import asyncio
import json
import pickle
import selectors
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import RunningService
from tribunal.integrations._gateway import gateway_client
from tribunal.integrations.trl import remote_reward
from tribunal.integrations.verl import compute_score, compute_score_sync

pytestmark = pytest.mark.e2e

MEMORY = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
CONNECTIONS_CLOSE_S = 30.0
"""Deadline for the proxy to see a closed connection (a condition waited for, not a timing)."""


class _Pipe(socketserver.BaseRequestHandler):
    server: CountingProxy

    def handle(self) -> None:
        self.server.count("opened")
        upstream = socket.create_connection(self.server.target)
        with upstream, selectors.DefaultSelector() as selector:
            selector.register(self.request, selectors.EVENT_READ, upstream)
            selector.register(upstream, selectors.EVENT_READ, self.request)
            while not self.server.stopping.is_set():
                for key, _ in selector.select(timeout=0.1):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        if key.fileobj is self.request:
                            self.server.count("closed")  # the client closed it
                        return
                    key.data.sendall(data)


class CountingProxy(socketserver.ThreadingTCPServer):
    """A TCP proxy on a free port of 127.0.0.1 that counts the connections clients open and
    close."""

    daemon_threads = False  # server_close joins the pipes: no socket outlives the test

    def __init__(self, target_url: str) -> None:
        host, port = target_url.removeprefix("http://").rsplit(":", 1)
        self.target = (host, int(port))
        self.stopping = threading.Event()
        self.counts = {"opened": 0, "closed": 0}
        self.changed = threading.Condition()
        super().__init__(("127.0.0.1", 0), _Pipe)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def count(self, what: str) -> None:
        with self.changed:
            self.counts[what] += 1
            self.changed.notify_all()

    def wait_closed(self, count: int) -> int:
        """The number of closed connections once it reaches ``count`` (or the deadline)."""
        with self.changed:
            self.changed.wait_for(lambda: self.counts["closed"] >= count, CONNECTIONS_CLOSE_S)
            return self.counts["closed"]


@pytest.fixture
def proxy(service: Callable[..., RunningService]) -> Iterator[CountingProxy]:
    math = service("math", env=MEMORY)
    gateway = service("gateway", env={**MEMORY, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url})
    server = CountingProxy(gateway.base_url)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        thread.join()
        server.server_close()


ROWS: dict[str, Any] = {
    "prompts": ["1+1?", "2+2?"],
    "completions": ["\\boxed{2}", "\\boxed{5}"],
    "ground_truth": ["2", "4"],
}


async def test_calls_on_one_loop_share_one_connection(proxy: CountingProxy) -> None:
    reward = remote_reward("rloo_math", url=proxy.url)
    for _ in range(5):
        assert await reward(**ROWS) == [1.0, 0.0]
    for _ in range(3):  # verl's per-sample calls on the same loop: the same client
        score = await compute_score("openai/gsm8k", "#### 18", "18", {}, url=proxy.url)
        assert score["score"] == 1.0
    # AsyncGRPOTrainer pickles the function after it was used: it holds no client, and the
    # copy scores on the loop's.
    copy = pickle.loads(pickle.dumps(reward))
    assert await copy(**ROWS) == [1.0, 0.0]
    assert proxy.counts == {"opened": 1, "closed": 0}


def test_each_threads_loop_has_its_own_client_closed_with_the_loop(
    proxy: CountingProxy,
) -> None:
    reward = remote_reward("rloo_math", url=proxy.url)
    both = threading.Barrier(2)
    clients: list[int] = []
    answers: list[list[float | None]] = []

    async def three_calls() -> None:
        for _ in range(3):
            answers.append(await reward(**ROWS))
        clients.append(id(await gateway_client(proxy.url, None, 600.0, 6)))
        await asyncio.to_thread(both.wait)  # both loops (and clients) alive at once

    threads = [threading.Thread(target=asyncio.run, args=(three_calls(),)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [[1.0, 0.0]] * 6
    assert len(set(clients)) == 2
    assert proxy.counts["opened"] == 2
    assert proxy.wait_closed(2) == 2  # asyncio.run closed each loop, and its client with it


def test_the_sync_twin_keeps_a_loop_per_thread(proxy: CountingProxy) -> None:
    scores: list[dict[str, Any]] = []
    both = threading.Barrier(2)

    def three_calls(then: Callable[[], object] = lambda: None) -> None:
        for _ in range(3):
            scores.append(compute_score_sync("openai/gsm8k", "#### 18", "18", {}, url=proxy.url))
        then()

    # Neither thread ends before both have made their calls: a call closes the loops of the
    # threads that have ended.
    threads = [threading.Thread(target=three_calls, args=(both.wait,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [s["score"] for s in scores] == [1.0] * 6
    assert proxy.counts == {"opened": 2, "closed": 0}  # kept while their threads lived
    # The next sync call closes the loops of threads that have ended, with their clients.
    three_calls()
    assert proxy.wait_closed(2) == 2
    assert proxy.counts["opened"] == 3


TRL_PROCESS = """
import asyncio, atexit, json, os, pickle, sys
import psutil

def open_to_the_gateway():
    # Registered first, so it runs last at exit: the process's sockets still open to the
    # gateway (the proxy) once every other exit handler has run.
    port = int(sys.argv[3])
    mine = psutil.Process().net_connections("tcp")
    left = [c.status for c in mine if c.raddr and c.raddr.port == port]
    print(json.dumps({"open_at_exit": left}), file=sys.stderr)

atexit.register(open_to_the_gateway)
if sys.argv[4] == "tribunal first":  # the user's script imports it before building the trainer
    import tribunal.integrations.trl
from trl.trainer.utils import shutdown_event_loop_in_daemon, start_event_loop_in_daemon

# As GRPOTrainer.__init__ does: a daemon thread runs a loop forever; exit stops it.
thread, loop, ready = start_event_loop_in_daemon(name="reward-loop")
ready.wait()
atexit.register(shutdown_event_loop_in_daemon, thread, loop)
reward = pickle.loads(bytes.fromhex(sys.argv[1]))
rows = json.loads(sys.argv[2])
answers = [asyncio.run_coroutine_threadsafe(reward(**rows), loop).result() for _ in range(4)]
print(json.dumps(answers))
"""


@pytest.mark.parametrize("order", ["tribunal first", "trl first"])
def test_an_unpickled_copy_in_trls_daemon_loop_closes_at_exit(
    proxy: CountingProxy, order: str
) -> None:
    """Either order of exit handlers: TRL's stops its loop before Tribunal's closes the
    clients on it ("tribunal first", as in a training script), or after (on the running
    loop)."""
    pytest.importorskip("trl")
    reward = remote_reward("rloo_math", url=proxy.url)
    argv = [sys.executable, "-X", "dev", "-W", "error", "-c", TRL_PROCESS]
    port = proxy.server_address[1]
    run = subprocess.run(
        [*argv, pickle.dumps(reward).hex(), json.dumps(ROWS), str(port), order],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert json.loads(run.stdout) == [[1.0, 0.0]] * 4
    last = run.stderr.strip().splitlines()[-1]
    assert json.loads(last) == {"open_at_exit": []}, run.stderr
    # -X dev shows every ResourceWarning (an unclosed socket or transport) and every
    # exception ignored in a finaliser.
    assert "Warning" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr
    assert proxy.counts["opened"] == 1
    assert proxy.wait_closed(1) == 1
