"""Fault scenarios on a real stack: a Redis with append-only persistence, a math API and its
workers as processes. ``bench/faults.py`` runs them at 2,000 items, ``tests/faults/`` at a few
hundred, and both check the same promise: every accepted item gets exactly one result, the
right one, and no fault turns into a permanent error.

Items are math items with a known answer (``\\boxed{i}`` against ``i``, or against ``i + 1``
for every third item), so a wrong reward is visible without scoring twice.
"""

from __future__ import annotations

import contextlib
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tribunal.testing.stack import RedisServer, RunningService, free_port


def math_items(n: int) -> list[dict[str, Any]]:
    """``n`` math items; item ``i`` earns 1.0 unless ``i % 3 == 0`` (then 0.0)."""
    return [
        {
            "id": f"i{i}",
            "response": f"The answer is \\boxed{{{i}}}.",
            "ground_truth": str(i + 1 if i % 3 == 0 else i),
        }
        for i in range(n)
    ]


def expected_reward(item_id: str) -> float:
    """The reward ``math_items`` promises for ``item_id``."""
    return 0.0 if int(item_id[1:]) % 3 == 0 else 1.0


@dataclass
class Tally:
    """What a job's results say about the promise (every figure should be 0).

    Attributes:
        lost: Items without a result when the job was read for the last time.
        duplicated: Item ids answered more than once, or results beyond the job's size.
        wrong: Results whose reward is not the known answer.
        permanent_errors: Results with a non-retryable error.
        retryable_errors: Results with a retryable error (the client may send them again).
    """

    lost: int = 0
    duplicated: int = 0
    wrong: int = 0
    permanent_errors: int = 0
    retryable_errors: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready figures, with up to three error messages."""
        return {
            "lost": self.lost,
            "duplicated": self.duplicated,
            "wrong": self.wrong,
            "permanent_errors": self.permanent_errors,
            "retryable_errors": self.retryable_errors,
            "first_errors": self.errors[:3],
        }

    @property
    def clean(self) -> bool:
        """True when nothing was lost, duplicated, wrong or failed."""
        return not (
            self.lost
            or self.duplicated
            or self.wrong
            or self.permanent_errors
            or self.retryable_errors
        )


def tally(n: int, results: list[dict[str, Any] | None]) -> Tally:
    """Count lost / duplicated / wrong / failed results of a job of ``math_items(n)``."""
    out = Tally()
    seen: set[str] = set()
    out.duplicated = max(0, len(results) - n)
    for index, result in enumerate(results[:n]):
        if result is None:
            out.lost += 1
            continue
        if result["id"] in seen or result["id"] != f"i{index}":
            out.duplicated += 1
        seen.add(result["id"])
        error = result.get("error")
        if error is not None:
            if error["retryable"]:
                out.retryable_errors += 1
            else:
                out.permanent_errors += 1
            out.errors.append(f"{error['code']}: {error['message']}")
        elif result["reward"] != expected_reward(result["id"]):
            out.wrong += 1
    return out


class Stack(RunningService):
    """A service's processes (``tribunal.testing.stack``) on a Redis with an append-only file
    (fsync on every write) in ``workdir``, under a key prefix of its own; nothing started yet.

    Processes start, are signalled and stop through the stack module (sessions of their own);
    ``close`` SIGKILLs every group that is left, and Redis, whatever happened, so a failed
    scenario leaves no process behind.

    Args:
        workdir: Where the append-only file and the processes' logs go (created).
        service: The service (``math``).
        env: ``TRIBUNAL_*`` variables on top of the scenarios' (visibility timeout 4 s, two
            verification processes per math worker).
    """

    def __init__(
        self, workdir: Path, service: str = "math", env: Mapping[str, str] | None = None
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.redis = RedisServer.on_free_port(aof_dir=workdir)
        super().__init__(
            service,
            f"http://127.0.0.1:{free_port()}",
            workdir,
            env={
                "TRIBUNAL_REDIS_URL": self.redis.url,
                "TRIBUNAL_KEY_PREFIX": f"f{uuid.uuid4().hex[:10]}",
                "TRIBUNAL_LOG_LEVEL": "INFO",
                "TRIBUNAL_VISIBILITY_TIMEOUT_S": "4",
                "TRIBUNAL_MATH_PROCESSES": "2",
                **(env or {}),
            },
        )

    @property
    def redis_port(self) -> int:
        """Port of this stack's Redis."""
        return self.redis.port

    def start_redis(self) -> None:
        """Start (or restart) Redis; return once it answers PING, its append-only file
        replayed."""
        self.redis.start(ready_s=20)

    def stop_redis(self) -> None:
        """Shut Redis down as an operator would (SIGTERM: it flushes the append-only file and
        exits; SIGKILL only after 20 s)."""
        self.redis.stop(grace_s=20)

    def close(self) -> None:
        """SIGKILL every process group still running, and Redis."""
        self.stop(grace_s=0)
        if self.redis.process is not None:
            self.redis.stop(grace_s=0)


def wait_until(
    predicate: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.1
) -> None:
    """Poll ``predicate`` until true; raise ``TimeoutError`` naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if predicate():
                return
        time.sleep(poll_s)
    raise TimeoutError(f"not {what} within {timeout_s} s")


def status(client: httpx.Client, path: str) -> int:
    """The status code of GET ``path`` (0 when the connection fails)."""
    try:
        return client.get(path).status_code
    except httpx.HTTPError:
        return 0


def submit(client: httpx.Client, items: list[dict[str, Any]], timeout_s: float = 60) -> str:
    """POST the items as a job, retrying 429/503 (what a client should do); return the id."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.post("/v1/jobs", json={"verifier": "math", "items": items})
        if response.status_code == 202:
            return str(response.json()["job_id"])
        if response.status_code not in (429, 503) or time.monotonic() > deadline:
            raise RuntimeError(f"submit answered {response.status_code}: {response.text}")
        time.sleep(0.5)


def completed(client: httpx.Client, job_id: str) -> int:
    """Items of the job with a result so far (0 while the API cannot answer)."""
    response = client.get(f"/v1/jobs/{job_id}")
    return int(response.json()["completed"]) if response.status_code == 200 else 0


def collect(client: httpx.Client, job_id: str, timeout_s: float) -> list[dict[str, Any] | None]:
    """Long-poll the job until done or ``timeout_s``; 503s (Redis away) are waited out."""
    deadline = time.monotonic() + timeout_s
    results: list[dict[str, Any] | None] = []
    while time.monotonic() < deadline:
        try:
            response = client.get(f"/v1/jobs/{job_id}", params={"wait": 5})
        except httpx.HTTPError:
            time.sleep(0.5)
            continue
        if response.status_code != 200:
            time.sleep(0.5)
            continue
        body = response.json()
        results = body["results"]
        if body["status"] == "done":
            break
    return results


def _start_stack(stack: Stack, client: httpx.Client, workers: int) -> None:
    stack.start_redis()
    stack.start_api()
    for n in range(workers):
        stack.start_worker(n)
    wait_until(lambda: status(client, "/readyz") == 200, 120, "ready")


def _mid_job(client: httpx.Client, job_id: str, n: int, share: float = 0.1) -> None:
    wait_until(lambda: completed(client, job_id) >= n * share, 120, "under way", 0.02)


def kill_worker(stack: Stack, n: int, sig: signal.Signals) -> dict[str, Any]:
    """Two workers; ``sig`` to worker 0's process group mid-job; the job is collected.

    Returns:
        The ``Tally`` figures, with ``exit_code`` and ``exit_s`` of worker 0 (the time from
        the signal to its exit).
    """
    with stack.http() as client:
        _start_stack(stack, client, workers=2)
        job_id = submit(client, math_items(n))
        _mid_job(client, job_id, n)
        sent = time.monotonic()
        stack.signal_group("worker0", sig)
        code = stack.wait_exit("worker0", 60)
        exit_s = time.monotonic() - sent
        figures = tally(n, collect(client, job_id, 300)).as_dict()
    return {**figures, "exit_code": code, "exit_s": round(exit_s, 2)}


def restart_redis(stack: Stack, n: int, down_s: float = 2.0) -> dict[str, Any]:
    """Redis shut down mid-job (SIGTERM: AOF flushed) and started again after ``down_s``."""
    with stack.http() as client:
        _start_stack(stack, client, workers=2)
        job_id = submit(client, math_items(n))
        _mid_job(client, job_id, n)
        stack.stop_redis()
        time.sleep(down_s)
        stack.start_redis()
        figures = tally(n, collect(client, job_id, 300)).as_dict()
    return figures


def redis_late(stack: Stack, n: int, down_s: float = 3.0) -> dict[str, Any]:
    """API and a worker started while Redis is down; Redis comes after ``down_s``; then the
    job is submitted, collected, and read again through a restarted API.

    Returns:
        The ``Tally`` figures, with ``readyz_while_down`` (the status /readyz answered).
    """
    stack.start_api()
    stack.start_worker(0)
    with stack.http() as client:
        wait_until(lambda: status(client, "/healthz") == 200, 120, "alive")
        time.sleep(down_s)
        readyz_down = status(client, "/readyz")
        stack.start_redis()
        wait_until(lambda: status(client, "/readyz") == 200, 120, "ready after Redis came")
        job_id = submit(client, math_items(n))
        collect(client, job_id, 300)
    stack.signal_group("api", signal.SIGTERM)
    stack.wait_exit("api", 30)
    stack.start_api()
    with stack.http() as client:
        wait_until(lambda: status(client, "/readyz") == 200, 120, "ready again")
        figures = tally(n, collect(client, job_id, 60)).as_dict()
    return {**figures, "readyz_while_down": readyz_down}
