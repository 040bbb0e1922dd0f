"""The ``code_session`` verifier: sessions start through the queue, calls reach their owner.

Routing (documented in ``docs/sessions.md``):

* ``POST /v1/code/sessions`` is an item of the ``code_session`` verifier on its shared
  stream, as every scoring request: whichever worker claims it starts the session and owns
  it. The session id is ``<owner>.<secret>``.
* Every worker that serves ``code_session`` also consumes a stream of its own,
  ``code_session.<owner>`` (same queue, same job store: :func:`owner_stream`). A call on a
  session (``run``, ``close``) is a one-item job on its owner's stream, so it reaches the one
  process that holds the interpreter, on any host that shares the Redis.
* The owner heartbeats on its own stream's worker registry, as every worker does on its
  verifier's: the API sees an owner without a heartbeat in the worker window as gone, and
  answers ``session_lost`` (before sending, and while waiting for an answer). A restarted
  worker has a new owner name: its predecessor's sessions are never silently replaced by
  fresh interpreters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from tribunal.code.sandbox import build_driver_pyc
from tribunal.code.seccomp import build_filter
from tribunal.code.session_models import CellRequest, SessionCreateItem, SessionInfo
from tribunal.code.sessions import SessionHost, SessionLimits
from tribunal.code.verifier import _CodeBase
from tribunal.core.queue.base import Delivery, JobQueue
from tribunal.core.verifier import score_each, verifier_info
from tribunal.wire.envelope import ItemOutcome, ScoreItem, result_json
from tribunal.wire.errors import (
    BadInput,
    ConfigurationError,
    InternalError,
    QueueUnavailable,
    TribunalError,
)

logger = logging.getLogger(__name__)

SESSION_VERIFIER = "code_session"


def owner_stream(owner: str) -> str:
    """The verifier name of ``owner``'s own stream (its session calls)."""
    return f"{SESSION_VERIFIER}.{owner}"


class CodeSessionVerifier(_CodeBase):
    """Starts code-interpreter sessions (``details`` is a :class:`SessionInfo`) and serves
    the calls on them that reach its own stream (:meth:`companion`)."""

    name = SESSION_VERIFIER
    item_model: type[ScoreItem] = SessionCreateItem
    details_model: Any = SessionInfo

    def __init__(self, config: Any, limits: SessionLimits) -> None:
        super().__init__(config)
        self.limits = limits
        self.host: SessionHost | None = None

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        """Sessions are never cached: each start is a new interpreter."""
        return None

    def utilisation(self) -> tuple[int, int]:
        """``(sessions held, max_sessions)``."""
        return (0, self.limits.max_sessions) if self.host is None else self.host.utilisation()

    async def start(self) -> None:
        """Check the sandbox as the other code verifiers do, then open the session slots.

        Raises:
            ConfigurationError: The sandbox cannot isolate programs here.
        """
        await super().start()
        await super().aclose()  # the probe's runner: sessions have slots of their own
        try:
            driver_pyc = await build_driver_pyc(self.config.python_path)
        except TribunalError as exc:
            raise ConfigurationError(exc.message) from exc
        bpf = build_filter() if self.config.seccomp else None
        self.host = SessionHost(self.config, self.limits, driver_pyc, bpf)

    async def aclose(self) -> None:
        """End every session and release the slots."""
        if self.host is not None:
            await self.host.aclose()
            self.host = None
        await super().aclose()

    def _require_host(self) -> SessionHost:
        if self.host is None:
            raise ConfigurationError("the session verifier was not started (await start())")
        return self.host

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Start one session per item."""
        return await score_each(items, SessionCreateItem, self.score_item)

    async def score_item(self, item: SessionCreateItem) -> ItemOutcome:
        """Start a session; its info in ``details`` (``reward`` None).

        Raises:
            SessionsFull: This worker holds ``max_sessions`` (retryable).
        """
        info = await self._require_host().create(item.idle_ttl_s, item.budget_s)
        return ItemOutcome(reward=None, details=info.model_dump(mode="json"))

    async def companion(self, queue: JobQueue, heartbeat_s: float, stop: asyncio.Event) -> None:
        """Serve this host's own stream until ``stop`` is set (seen within a claim's block
        time, 1 s): calls on its sessions, its heartbeat, the idle TTL. Run beside the
        worker's claim loop (``WorkerRuntime``); calls still running at stop are cancelled
        (their sessions end with the worker)."""
        host = self._require_host()
        stream = owner_stream(host.owner)
        while not stop.is_set():
            try:
                await queue.ensure_verifier(stream)
                break
            except QueueUnavailable:
                await asyncio.sleep(1.0)
        tasks: set[asyncio.Task[None]] = set()
        # The heartbeat ends on ``done``, never by a cancellation, which a Redis call may
        # lose on Python 3.11 (see ``WorkerRuntime._heartbeat``); the expiry only sleeps.
        done = asyncio.Event()
        beat = asyncio.create_task(self._beat(queue, stream, host, heartbeat_s, done))
        expiry = asyncio.create_task(host.expire_forever())
        try:
            while not stop.is_set():
                try:
                    deliveries = await queue.claim(stream, host.owner, 16, 1.0)
                except QueueUnavailable as exc:
                    logger.warning("session calls: claim failed (%s); retrying in 1 s", exc)
                    await asyncio.sleep(1.0)
                    continue
                for delivery in deliveries:
                    task = asyncio.create_task(self._answer(queue, stream, delivery))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
        finally:
            done.set()
            for task in [expiry, *tasks]:
                task.cancel()
            await asyncio.gather(beat, expiry, *tasks, return_exceptions=True)
            with contextlib.suppress(QueueUnavailable):
                await queue.retire(stream, host.owner)

    async def _beat(
        self,
        queue: JobQueue,
        stream: str,
        host: SessionHost,
        period_s: float,
        until: asyncio.Event,
    ) -> None:
        while not until.is_set():
            try:
                await queue.heartbeat(stream, host.owner, host.utilisation())
            except QueueUnavailable as exc:
                logger.warning("session heartbeat failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), period_s)

    async def _answer(self, queue: JobQueue, stream: str, delivery: Delivery) -> None:
        outcome = await self._call(delivery.payload)
        written = result_json("call", outcome, verifier_info(self))
        for _ in range(10):
            try:
                await queue.complete(stream, [(delivery, written)])
                return
            except QueueUnavailable:
                await asyncio.sleep(1.0)

    async def _call(self, payload: Mapping[str, Any]) -> ItemOutcome:
        host = self._require_host()
        try:
            session_id = str(payload["session_id"])
            if payload.get("op") == "close":
                await host.close(session_id)
                return ItemOutcome(reward=None, details={"closed": True})
            try:
                cell = CellRequest.model_validate(payload.get("cell"))
            except ValidationError as exc:
                raise BadInput(f"cell: {exc}", field="cell") from exc
            result = await host.run(session_id, cell)
            return ItemOutcome(reward=None, details=result.model_dump(mode="json"))
        except TribunalError as exc:
            return ItemOutcome.failed(exc)
        except Exception:
            logger.exception("a session call failed")
            return ItemOutcome.failed(InternalError("a session call failed; see the worker's logs"))
