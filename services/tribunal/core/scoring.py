"""The API side of scoring: validate items, answer cache hits, enqueue, wait, assemble.

Validation is per item. An item that does not match the verifier's schema gets a
``bad_input`` result naming its field, and the rest of the batch is scored; a batch in which
no item is valid is answered the same way (every item with its own error), since an item's
fault is never the request's (issue 36): a trainer sending one sample a request (verl's
``compute_score``) gets that sample's error as the result, like any other. Only the request's
own shape (not JSON, ``items`` not a non-empty list, too large) is refused as a whole.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from tribunal.core.cache import ResultCache, cache_entry
from tribunal.core.queue.base import (
    Delivery,
    JobQueue,
    JobRecord,
    JobStore,
    QueuedItem,
    Submitted,
)
from tribunal.core.queue.keys import JOB_ID
from tribunal.core.request_models import InvalidItem
from tribunal.core.verifier import Verifier, verifier_info
from tribunal.wire.envelope import ItemOutcome, JobState, ScoreItem, result_json
from tribunal.wire.errors import (
    BackendUnavailable,
    BadInput,
    JobNotFound,
    PayloadTooLarge,
    QueueUnavailable,
    ScoringTimeout,
)
from tribunal.wire.hashing import json_digest

if TYPE_CHECKING:  # the inspector's store imports the Redis queue
    from tribunal.core.inspection.store import InspectRecorder

NO_REFUSAL_KEPT_S = 1.0
"""How long an API trusts that its verifier's workers have not refused to start (s)."""


class ScoringService:
    """Scores batches for one verifier through the queue.

    Args:
        verifier: The verifier (its item model, name, version and config hash are used here;
            it is not started by the API unless the queue is embedded).
        queue: The job queue.
        cache: The result cache.
        max_batch_items: Items per request (``PayloadTooLarge`` above).
        request_model: The verifier's score request model (``score_request_model``), built
            once per app so that the route and ``/v1/jobs`` validate with the same class.
        recorder: Keeps the items this API answers from the result cache for the reward
            inspector (no worker sees them), or None.
    """

    def __init__(
        self,
        verifier: Verifier,
        queue: JobQueue,
        cache: ResultCache,
        max_batch_items: int,
        request_model: type[BaseModel],
        worker_window_s: float = 5.0,
        recorder: InspectRecorder | None = None,
    ) -> None:
        self.recorder = recorder
        self.worker_window_s = worker_window_s
        self.verifier = verifier
        self.queue = queue
        self.cache = cache
        self.max_batch_items = max_batch_items
        self.info = verifier_info(verifier)
        self.request_model = request_model
        self._no_refusal_until = 0.0

    def parse_items(self, raw_items: Any) -> list[ScoreItem | InvalidItem]:
        """Validate ``{"items": raw_items}`` against this verifier's schema (for callers that
        receive items untyped, such as the gateway's fan-out).

        Raises:
            BadInput: ``items`` is not a non-empty list.
        """
        try:
            request = self.request_model.model_validate({"items": raw_items})
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(p) for p in first["loc"])
            raise BadInput(f"{path}: {first['msg']}", field=path) from exc
        items: list[ScoreItem | InvalidItem] = request.items  # type: ignore[attr-defined]
        return items

    async def submit(
        self,
        items: Sequence[ScoreItem | InvalidItem],
        idempotency_key: str | None = None,
        use_cache: bool = True,
    ) -> Submitted:
        """Queue a batch: invalid items and cache hits get their results at once.

        ``use_cache=False`` (a request with ``Cache-Control: no-cache``) scores every item
        afresh: its items are neither answered from the cache nor stored in it.

        Raises:
            PayloadTooLarge: More than ``max_batch_items`` items.
            QueueFull, QueueUnavailable, IdempotencyConflict: From the queue.
            BackendUnavailable: The verifier's workers refused to start and none is live
                (the items would wait for nothing).
        """
        self._check_batch(items, "use several jobs")
        prefilled: dict[int, str] = {}
        payloads: list[tuple[int, dict[str, Any], str | None]] = []
        for index, item in enumerate(items):
            if isinstance(item, InvalidItem):
                prefilled[index] = self._invalid_result(index, item)
                continue
            cache_payload = self.verifier.cache_payload(item) if use_cache else None
            key = (
                None
                if cache_payload is None
                else cache_entry(self.info.version, self.info.config_hash, cache_payload)
            )
            payloads.append((index, item.model_dump(mode="json"), key))
        hits = await self._answer_from_cache(payloads, prefilled)
        await self._check_refusal()
        queued = [QueuedItem(i, payload, key) for i, payload, key in payloads if i not in prefilled]
        # Hashing the whole batch costs a dump of every response: only a batch with an
        # idempotency key needs it, and json_digest tells batches apart as sha256_hex does
        # at a quarter of its cost (256 GSM8K items: 0.3-0.5 ms against 1.0-1.9 ms).
        request_hash = (
            json_digest(
                [
                    self.verifier.name,
                    [item.raw if isinstance(item, InvalidItem) else None for item in items],
                    [p for _, p, _ in payloads],
                ]
            )
            if idempotency_key
            else ""
        )
        submitted = await self.queue.submit(
            self.verifier.name,
            queued,
            total=len(items),
            prefilled=prefilled,
            idempotency_key=idempotency_key,
            request_hash=request_hash,
        )
        if hits and submitted.created and self.recorder is not None:
            self._record_hits(submitted.job_id, hits, prefilled)
        return submitted

    def _record_hits(
        self, job_id: str, hits: list[tuple[int, dict[str, Any]]], prefilled: dict[int, str]
    ) -> None:
        """Keep the cache hits of job ``job_id`` for the inspector, as a worker keeps what it
        scores: a GRPO group one of whose completions was a hit is then shown whole (their
        results carry ``cached: true``), not as the rest of it. Their queue entry id is the
        time they were answered, so their latency reads 0."""
        assert self.recorder is not None
        entry_id = f"{int(time.time() * 1000)}-0"
        self.recorder.record(
            [
                (Delivery(entry_id, job_id, index, payload, None, 1), prefilled[index])
                for index, payload in hits
            ]
        )

    async def score_in_process(
        self,
        items: Sequence[ScoreItem | InvalidItem],
        score_valid: Callable[[list[ScoreItem]], Awaitable[list[str]]],
        on_results: Callable[[list[str]], None] | None = None,
    ) -> str:
        """Score a batch in this process, not through the queue, and return the
        ``ScoreResponse`` as JSON text: the batch is checked as :meth:`submit` checks it,
        ``score_valid`` scores the valid items (one ``ItemResult`` JSON text each, in order)
        and the invalid ones are answered here; ``on_results``, when given, is then called
        with every item's ``ItemResult`` JSON text, in request order.

        Raises:
            PayloadTooLarge: More than ``max_batch_items`` items.
            Exception: Whatever ``score_valid`` raises.
        """
        self._check_batch(items, "use /v1/jobs")
        valid = [(i, item) for i, item in enumerate(items) if isinstance(item, ScoreItem)]
        scored = await score_valid([item for _, item in valid]) if valid else []
        texts = [
            self._invalid_result(index, item) if isinstance(item, InvalidItem) else ""
            for index, item in enumerate(items)
        ]
        for (index, _), text in zip(valid, scored, strict=True):
            texts[index] = text
        if on_results is not None:
            on_results(texts)
        return _response_json(texts)

    def _check_batch(self, items: Sequence[ScoreItem | InvalidItem], instead: str) -> None:
        """Refuse a batch of too many items (``instead``: what to do instead besides
        splitting it)."""
        if len(items) > self.max_batch_items:
            raise PayloadTooLarge(
                f"items: {len(items)} items in one request; the limit is "
                f"{self.max_batch_items} (TRIBUNAL_MAX_BATCH_ITEMS); split the batch or "
                f"{instead}",
                field="items",
            )

    def _invalid_result(self, index: int, item: InvalidItem) -> str:
        """The ``ItemResult`` JSON of an item that failed validation."""
        failed = ItemOutcome.failed(item.bad_input(index))
        return result_json(item.item_id(index), failed, self.info)

    async def _check_refusal(self) -> None:
        # A Redis round trip on every request (~5 % of the API's CPU per one-item request,
        # measured); a refusal is a worker's start-up state, so an answer of "none" is kept
        # for a second. A refusal found is checked again on every request.
        if time.monotonic() < self._no_refusal_until:
            return
        name = self.verifier.name
        refusal = await self.queue.refusal(name)
        if refusal is None:
            self._no_refusal_until = time.monotonic() + NO_REFUSAL_KEPT_S
            return
        if await self.queue.live_workers(name, self.worker_window_s) == 0:
            raise BackendUnavailable(
                f"no {name} worker is running: it refused to start: {refusal}", retry_after_s=30
            )

    async def _answer_from_cache(
        self, payloads: list[tuple[int, dict[str, Any], str | None]], prefilled: dict[int, str]
    ) -> list[tuple[int, dict[str, Any]]]:
        """Put the cached results of ``payloads`` into ``prefilled``; return the hits
        (index, payload)."""
        keyed = [(i, payload, key) for i, payload, key in payloads if key]
        if not keyed:
            return []
        values = await self.cache.get_many([key for _, _, key in keyed if key])
        hits = []
        for (index, payload, _), value in zip(keyed, values, strict=True):
            if value is None:
                continue
            outcome = ItemOutcome.model_validate_json(value)
            prefilled[index] = result_json(str(payload["id"]), outcome, self.info, cached=True)
            hits.append((index, payload))
        if hits:
            await self.queue.incr_stats(self.verifier.name, {"cache_hits": len(hits)})
        return hits

    async def score(
        self,
        items: Sequence[ScoreItem | InvalidItem],
        timeout_s: float,
        use_cache: bool = True,
        idempotency_key: str | None = None,
    ) -> str:
        """Queue a batch, wait for it and return the ``ScoreResponse`` as JSON text.

        With ``idempotency_key`` the batch is submitted as in :meth:`submit`: a key already
        used for the same batch waits for that job instead of queueing the batch again.

        Raises:
            IdempotencyConflict: ``idempotency_key`` names a job made from another batch.
            ScoringTimeout: Not done within ``timeout_s``; it carries the job id to poll.
            QueueUnavailable: The queue went away after the batch was accepted; it carries
                the job id (the items are scored when the queue is back), or the queue was
                unavailable at submission and nothing was enqueued.
        """
        submitted = await self.submit(items, idempotency_key, use_cache=use_cache)
        job_id = submitted.job_id
        try:
            record = await self.queue.wait(job_id, timeout_s)
        except QueueUnavailable as exc:
            raise QueueUnavailable(
                f"{exc.message}; the batch was accepted as job {job_id} and is scored when "
                f"the queue is back: GET /v1/jobs/{job_id} for its results",
                retry_after_s=exc.retry_after_s,
                job_id=job_id,
            ) from exc
        if not record.is_done:
            raise ScoringTimeout(
                f"the batch was not scored within {timeout_s:g} s; it stays queued: "
                f"GET /v1/jobs/{job_id} for its results",
                job_id=job_id,
            )
        return _response_json(record.results[i] for i in range(record.total))


def _response_json(results: Iterable[str]) -> str:
    """``ScoreResponse`` JSON text around ``ItemResult`` JSON texts, spliced as they are."""
    return '{"results":[' + ",".join(results) + "]}"


def wants_cache(cache_control: str | None) -> bool:
    """False when a ``Cache-Control`` header says ``no-cache`` (or ``no-store``)."""
    directives = {part.strip().lower() for part in (cache_control or "").split(",")}
    return not directives & {"no-cache", "no-store"}


CACHE_CONTROL_DESCRIPTION = (
    "`no-cache`: score every item afresh (identical inputs under the same verifier version "
    "are otherwise answered from the result cache, with `cached: true`)."
)


IDEMPOTENCY_KEY_DESCRIPTION = (
    "Client-chosen key (1 to 256 characters): the batch becomes the job of this key, as with "
    "`idempotency_key` on `POST /v1/jobs`, so a request resent after a lost answer or an "
    "interruption is answered from that job (scored once, kept `TRIBUNAL_RESULT_TTL_S`); "
    "the same key with another batch is a 409 (idempotency_conflict)."
)


async def job_state(queue: JobStore, job_id: str, wait_s: float) -> str:
    """Return a job's state as ``JobState`` JSON, long-polling up to ``wait_s`` for it to be
    done; an id not of the issued format is ``JobNotFound``. The stored results are already
    ``ItemResult`` JSON: they are spliced in as they are rather than parsed and serialised
    again (that was a fifth of the API's CPU on large jobs)."""
    if not JOB_ID.fullmatch(job_id):
        raise JobNotFound(
            f"no job {job_id!r}: job ids are 32 lowercase hex digits, as POST /v1/jobs issues",
            field="job_id",
        )
    record: JobRecord = await (queue.wait(job_id, wait_s) if wait_s > 0 else queue.job(job_id))
    head = JobState(
        job_id=record.job_id,
        verifier=record.verifier,
        status="done" if record.is_done else "pending",
        total=record.total,
        completed=len(record.results),
        results=[],
    ).model_dump_json()
    results = ",".join(record.results.get(i, "null") for i in range(record.total))
    return head.removesuffix("[]}") + "[" + results + "]}"
