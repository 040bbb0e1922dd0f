"""The gateway's connection to the verifiers: their HTTP APIs through ``tribunal.client``.

Why HTTP and not their queues directly: each verifier's API validates, answers from its
result cache and enqueues, exactly as for any other client; the gateway then needs no
knowledge of the verifiers' payloads, versions or Redis keys, works with verifiers on other
hosts or behind their own load balancers, and a verifier can be upgraded without touching
it. The cost is one HTTP hop per verifier and batch, measured by bench/gateway_overhead.py.

Back-pressure (a verifier answering 429 ``queue_full`` after the client's retries) is passed
on, never turned into a reward: a synchronous route that scores inside :func:`placing`
learns which verifiers shed its items and answers 429 with their longest ``Retry-After``;
outside it (the gateway's queue worker, scoring a job) the request waits for the verifier
and tries again, up to ``shed_wait_s``, so that a queued job waits instead of failing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import httpx
import orjson
from httpx_aiohttp import AiohttpTransport

from tribunal.client import APIError, ClientError, TribunalClient
from tribunal.wire.errors import ERRORS_BY_CODE, BackendUnavailable, QueueFull

logger = logging.getLogger(__name__)


_SHED_RETRY_AFTER_S = 1.0
"""Retry-After assumed when a verifier's 429 carries none."""


class LoadShed:
    """The verifiers that shed a synchronous batch's items (429) and their longest
    ``Retry-After`` (s)."""

    def __init__(self) -> None:
        self.verifiers: set[str] = set()
        self.retry_after_s = 0.0

    def add(self, verifier: str, retry_after_s: float | None) -> None:
        """Record that ``verifier`` refused items, asking for ``retry_after_s``."""
        self.verifiers.add(verifier)
        self.retry_after_s = max(self.retry_after_s, retry_after_s or _SHED_RETRY_AFTER_S)

    def error(self) -> QueueFull | None:
        """The 429 of the whole batch, or None when no verifier shed any item."""
        if not self.verifiers:
            return None
        names = ", ".join(sorted(self.verifiers))
        return QueueFull(
            f"{names}: the verifier's queue is full and could not take this batch's items; "
            f"retry the batch after {self.retry_after_s:g} s (Retry-After)",
            retry_after_s=self.retry_after_s,
        )


class InFlightItems:
    """A bound on the items that one API process's synchronous routes score at once.

    A synchronous request holds its connection, its parsed body and its fan-out's tasks in
    the API process until its verifiers answer; without a bound, requests offered faster than
    the verifiers answer wait in the process and its memory grows with the line (measured by
    bench/load.py). Beyond the bound a request is refused at once with 429 and
    ``Retry-After``, as a verifier refuses items beyond its queue bound.

    Single event loop: the count needs no lock (no ``await`` between check and update).

    Args:
        bound: Items in flight at most (``TRIBUNAL_GATEWAY_MAX_INFLIGHT_ITEMS``); a batch
            larger than the bound is still taken when nothing else is in flight, so that
            every batch ``TRIBUNAL_MAX_BATCH_ITEMS`` admits can be scored.
        retry_after_s: ``Retry-After`` of a refusal (s).
    """

    def __init__(self, bound: int, retry_after_s: float = _SHED_RETRY_AFTER_S) -> None:
        if bound < 1:
            raise ValueError(f"bound must be >= 1, not {bound}")
        self.bound = bound
        self.retry_after_s = retry_after_s
        self.items = 0

    @contextlib.contextmanager
    def admit(self, count: int) -> Iterator[None]:
        """Hold ``count`` items in flight for the block.

        Raises:
            QueueFull: The items in flight and ``count`` together exceed the bound (429,
                ``Retry-After``); nothing of the request was started.
        """
        if self.items and self.items + count > self.bound:
            raise QueueFull(
                f"the gateway is scoring {self.items} items in this process, and {count} more "
                f"would pass its bound (TRIBUNAL_GATEWAY_MAX_INFLIGHT_ITEMS={self.bound}); "
                f"retry after {self.retry_after_s:g} s (Retry-After)",
                retry_after_s=self.retry_after_s,
            )
        self.items += count
        try:
            yield
        finally:
            self.items -= count


_SHED: ContextVar[LoadShed | None] = ContextVar("tribunal_gateway_shed", default=None)


@contextlib.contextmanager
def placing(shed: LoadShed) -> Iterator[LoadShed]:
    """Score synchronously within this block: a verifier's 429 is recorded in ``shed`` (and
    its items get ``queue_full``) rather than waited out. Tasks started inside the block
    (``asyncio.gather``, ``wait_for``) see it too."""
    token = _SHED.set(shed)
    try:
        yield shed
    finally:
        _SHED.reset(token)


class ClientVerifiers:
    """Scores batches on the verifiers' ``POST /v1/<verifier>/score``, one
    :class:`~tribunal.client.TribunalClient` per verifier.

    Args:
        urls: Verifier name -> base URL.
        timeout_s: Deadline of one request.
        api_key: Bearer token sent to the verifiers, if they need one.
        max_retries: Retries of a request that failed for a retryable reason (the client
            backs off, honouring ``Retry-After``).
        max_concurrency: Requests in flight per verifier.
        shed_wait_s: Outside :func:`placing` (a job), how long a batch a verifier refuses
            with 429 keeps waiting for it before its items get ``queue_full``.
    """

    def __init__(
        self,
        urls: dict[str, str],
        timeout_s: float,
        api_key: str | None,
        max_retries: int = 2,
        max_concurrency: int = 64,
        shed_wait_s: float = 600.0,
    ) -> None:
        self.shed_wait_s = shed_wait_s
        # Verifier -> why it is failing now (shedding load, unreachable): logged when that
        # changes, never per request (a log that grows with traffic).
        self._failing: dict[str, str] = {}
        self.clients = {
            name: TribunalClient(
                url,
                api_key=api_key,
                timeout=timeout_s,
                max_retries=max_retries,
                max_concurrency=max_concurrency,
                transport=_transport(max_concurrency),
            )
            for name, url in urls.items()
        }

    async def score(self, verifier: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Score ``items`` on ``verifier``; one result per item, in order, as the verifier
        wrote it (decoded ``ItemResult`` JSON).

        A 429 (the verifier sheds load) is waited out and retried for up to
        ``shed_wait_s`` outside :func:`placing`; inside it, it is recorded in the block's
        ``LoadShed`` and raised at once.

        Raises:
            TribunalError: The request failed as a whole: the verifier's own error class
                when it answered one (``QueueFull`` for a 429), ``BackendUnavailable``
                (retryable) when it could not be reached.
        """
        client = self.clients[verifier]
        # Items encoded with orjson (json.dumps was a fifth of the gateway's CPU per item).
        body = [_item_json(item) for item in items]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.shed_wait_s
        while True:
            try:
                results = await client.score_json(verifier, body)
            except APIError as exc:
                shed = _SHED.get()
                self._state(verifier, "sheds load (429)" if exc.status == 429 else None)
                if exc.status == 429 and shed is None and loop.time() < deadline:
                    # A job's batch: the verifier sheds load; wait for it, never fail the job.
                    wait_s = min(exc.retry_after_s or _SHED_RETRY_AFTER_S, deadline - loop.time())
                    logger.debug("%s sheds load (429); waiting %.1f s", verifier, wait_s)
                    await asyncio.sleep(max(wait_s, 0.0))
                    continue
                if exc.status == 429 and shed is not None:
                    shed.add(verifier, exc.retry_after_s)
                cls = ERRORS_BY_CODE.get(exc.code, BackendUnavailable)
                raise cls(
                    f"{client.base_url}: {exc.message}",
                    field=exc.field,
                    retry_after_s=exc.retry_after_s,
                ) from None
            except ClientError as exc:
                self._state(verifier, "cannot be reached")
                raise BackendUnavailable(f"{client.base_url}: {exc}") from None
            self._state(verifier, None)
            return results

    def _state(self, verifier: str, failing: str | None) -> None:
        """Log a verifier's change of state: failing (why), or answering again."""
        before = self._failing.get(verifier)
        if failing == before:
            return
        if failing is None:
            self._failing.pop(verifier, None)
            logger.info("%s answers again (it %s before)", verifier, before)
        else:
            self._failing[verifier] = failing
            logger.warning("%s at %s %s", verifier, self.clients[verifier].base_url, failing)

    async def aclose(self) -> None:
        """Close every client's connection pool."""
        await asyncio.gather(*(client.aclose() for client in self.clients.values()))


def _transport(max_concurrency: int) -> httpx.AsyncBaseTransport:
    """aiohttp's connection pool under httpx's interface (httpx-aiohttp).

    httpx's own pool (httpcore 1.0) polls the socket of every pooled connection to see
    whether it expired, on each request and each release: with one-item requests at a few
    hundred per second that was 36 % of the gateway API's CPU, and the client call 62 %
    (py-spy, 50 concurrent one-item requests; docs/benchmarks.md, Load). aiohttp's pool
    does no such scan; the client's retries, timeouts and errors are the same (its
    exceptions are mapped to httpx's).
    """
    limits = httpx.Limits(
        max_connections=max_concurrency, max_keepalive_connections=max_concurrency
    )
    return AiohttpTransport(limits=limits)


def _item_json(item: dict[str, Any]) -> bytes:
    """An item as JSON: orjson, or json for what orjson refuses (an integer past 64 bits)."""
    try:
        data: bytes = orjson.dumps(item)
    except orjson.JSONEncodeError:
        return json.dumps(item, ensure_ascii=False).encode()
    return data


PROBE_TIMEOUT_S = 1.5
"""Deadline of one probe of a verifier's ``/readyz`` from the gateway's, seconds: longer than
a verifier's probe of its LLM backend (1 s), within ``tribunal healthcheck``'s 3 s."""


async def verifiers_unready(
    urls: Mapping[str, str], api_key: str | None, timeout_s: float = PROBE_TIMEOUT_S
) -> list[str]:
    """Why the gateway cannot score through each of its verifiers now: one reason per
    verifier whose ``/readyz`` is unreachable or not 200, and one per reason a ``degraded``
    verifier gives (prefixed with its name). The verifiers are probed concurrently.

    Args:
        urls: Verifier name -> base URL (the gateway's ``verifier_urls()``).
        api_key: Bearer token sent to the verifiers, if they need one.
        timeout_s: Deadline of each probe, seconds.

    Returns:
        The reasons, verifiers in ``urls``' order; [] when every verifier is ready.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def probe(client: httpx.AsyncClient, name: str, url: str) -> list[str]:
        where = f"{name} at {url}"
        try:
            response = await client.get(url.rstrip("/") + "/readyz", headers=headers)
        except httpx.HTTPError as exc:
            return [f"{where} is unreachable ({type(exc).__name__})"]
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        reasons = body.get("reasons")
        said = [str(r) for r in reasons] if isinstance(reasons, list) else []
        if response.status_code != 200:
            return [f"{where} is not ready (HTTP {response.status_code})"] + [
                f"{name}: {reason}" for reason in said
            ]
        return [f"{name}: {reason}" for reason in said]

    async with httpx.AsyncClient(timeout=timeout_s) as client:
        found = await asyncio.gather(*(probe(client, n, u) for n, u in urls.items()))
    return [reason for reasons in found for reason in reasons]
