"""``TribunalClient``: the async client of every Tribunal service (httpx).

One client talks to one service URL (``http://127.0.0.1:8101`` for math). It sends batches
synchronously (``score``) or as jobs (``submit``, then ``wait`` or ``iter_results``), and
returns the envelope's typed :class:`~tribunal.wire.envelope.ItemResult` models. On the code
service it also runs one program as a tool call (``run_code``), outside the envelope.

Load and failure handling:

- At most ``max_concurrency`` requests are in flight: an ``asyncio.Semaphore`` sits in front
  of the connection pool, which is sized to the same number, so requests wait in the
  semaphore and never in the pool.
- One timeout per phase (``httpx.Timeout``: connect, read, write, pool). A long-poll adds
  its wait to the read timeout of that request.
- Retries with jittered exponential backoff: connection errors and timeouts, 429
  (queue full) and 503 (queue or backend unavailable), honouring a longer ``Retry-After``.
  Other statuses are never retried: a 4xx is the request's fault, a 504 means the batch
  stays queued (poll it as a job), a 500 is a bug. A retried ``submit`` with an
  idempotency key can never create a second job. A read timeout is retried only where
  sending again cannot queue the batch twice (a GET, or a batch with an idempotency key):
  the service has the batch and is slow or stuck, and another copy would only add to it.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import ssl
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import BaseModel

from tribunal.client.errors import (
    APIError,
    JobNotFoundError,
    JobTimeout,
    Overloaded,
    RequestRejected,
    ServerError,
    TransportError,
)
from tribunal.wire.jsonparse import loads

if TYPE_CHECKING:
    from tribunal.wire.code import RunDetails, RunItem
    from tribunal.wire.envelope import ItemResult, JobState

# The wire models are imported where they are used (score, submit, job, run_code): building
# them costs `tribunal score` some 20 ms of start-up, and score_json, all it sends, needs none.

Item = Mapping[str, Any] | BaseModel
"""An item to score: a dict in the verifier's item schema, or its wire model (``MathItem``)."""

DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=330.0, write=60.0, pool=10.0)
"""Per phase, seconds. The read timeout outlasts the services' synchronous deadline
(``TRIBUNAL_SYNC_TIMEOUT_S``, 300 s by default)."""

_RETRY_STATUSES = frozenset({429, 503})
_MAX_WAIT_PER_POLL_S = 60.0
"""Longest single long-poll asked for (the services cap it at ``TRIBUNAL_MAX_WAIT_S``)."""


def rewards(results: Sequence[ItemResult]) -> list[float | None]:
    """Return each result's reward: a float, or None for an item that has an error.

    A failed item is never 0: a trainer decides what an unscored item means (drop it, mask
    its group ...).
    """
    return [None if r.error is not None else r.reward for r in results]


def item_json(item: Item) -> Mapping[str, Any]:
    """Return an item as JSON-ready data (a wire model is dumped without unset fields, so the
    service applies its own defaults)."""
    if isinstance(item, BaseModel):
        return item.model_dump(mode="json", exclude_unset=True)
    if isinstance(item, Mapping):
        return item
    raise TypeError(f"an item is a dict or a pydantic model, not {type(item).__name__}")


def _step(step: int | None) -> int | None:
    """``step`` as the gateway takes it: None, or an integer >= 0.

    Raises:
        ValueError: Anything else (a bool, a float, a negative number), naming ``step``.
    """
    if step is None:
        return None
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step: the trainer's step is an integer >= 0, not {step!r}")
    return step


def _batch_fields(
    verifier: str, step: int | None, policy_version: str | None, audit: Item | None
) -> dict[str, Any]:
    """A gateway batch's envelope fields that are given: ``step``, ``policy_version`` and
    ``audit`` (a dict or an ``ItemAudit``, sent as JSON).

    Raises:
        ValueError: One of them for a verifier other than the gateway (a verifier's envelope
            has no such field), or ``step`` not an integer >= 0, naming the field.
        TypeError: ``audit`` neither a dict nor a pydantic model.
    """
    if audit is not None and not isinstance(audit, (Mapping, BaseModel)):
        raise TypeError(f"audit: a dict or an ItemAudit, not {type(audit).__name__}")
    sent = None if audit is None else item_json(audit)
    fields: dict[str, Any] = {}
    given = (("step", _step(step)), ("policy_version", policy_version), ("audit", sent))
    for name, value in given:
        if value is None:
            continue
        if verifier != "gateway":
            raise ValueError(f"{name}: only the gateway takes a batch's {name}")
        fields[name] = value
    return fields


class TribunalClient:
    """Async client of one Tribunal service.

    Args:
        base_url: The service root, e.g. ``http://127.0.0.1:8101``.
        api_key: Bearer token when the service sets ``TRIBUNAL_API_KEY``.
        timeout: Seconds for every phase, or an ``httpx.Timeout`` (see
            :data:`DEFAULT_TIMEOUT`).
        max_concurrency: Requests in flight at once; the connection pool holds as many.
        max_retries: Extra attempts after a retryable failure.
        backoff_s: First backoff, seconds; doubles per attempt with jitter.
        backoff_max_s: Longest backoff, seconds (a longer ``Retry-After`` wins, up to
            ``retry_after_max_s``).
        retry_after_max_s: Longest ``Retry-After`` honoured, seconds.
        transport: An httpx transport (tests: ``httpx.ASGITransport(app)``).

    Examples:
        >>> async with TribunalClient("http://127.0.0.1:8101") as client:  # doctest: +SKIP
        ...     results = await client.score("math", [{"id": "a", "response": "#### 18",
        ...                                            "ground_truth": "18"}])
        ...     rewards(results)
        [1.0]
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        max_concurrency: int = 16,
        max_retries: int = 6,
        backoff_s: float = 0.25,
        backoff_max_s: float = 10.0,
        retry_after_max_s: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.retry_after_max_s = retry_after_max_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # Requests only ever go to base_url: over plain HTTP no TLS is used, so skip loading
        # the CA bundle (30 ms per client); this context verifies, and trusts no one.
        verify: ssl.SSLContext | bool = (
            True if self.base_url.startswith("https:") else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        )
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            verify=verify,
            timeout=self.timeout,
            limits=httpx.Limits(
                max_connections=max_concurrency, max_keepalive_connections=max_concurrency
            ),
            transport=transport,
        )
        self._semaphore = asyncio.Semaphore(max_concurrency)

    async def __aenter__(self) -> TribunalClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    # -- endpoints ----------------------------------------------------------------------------

    async def score(
        self,
        verifier: str,
        items: Sequence[Item],
        *,
        idempotency_key: str | None = None,
        step: int | None = None,
        policy_version: str | None = None,
        audit: Item | None = None,
    ) -> list[ItemResult]:
        """Score a batch synchronously (``POST /v1/<verifier>/score``).

        Args:
            verifier: ``math``, ``code``, ``judge`` ...
            items: Dicts or wire models; each needs an ``id``.
            idempotency_key: Sent as ``Idempotency-Key``: the batch is the job of this key,
                so a retried or repeated request is answered from it (scored once), and a
                504 carries its ``job_id`` for :meth:`wait`.
            step: The trainer's step of the batch (``gateway`` only): the gateway windows its
                audits by it (docs/audits.md); None: by time.
            policy_version: The policy that wrote the responses (``gateway`` only).
            audit: The auditor of the batch's ``verifier`` items that name none of their own
                (``gateway`` only): ``{"spec": ..., "rate": ...}`` or an ``ItemAudit``
                (docs/audits.md); an item's own ``audit`` wins.

        Returns:
            One result per item, in order; failed items have ``reward=None`` and an error.

        Raises:
            RequestRejected: 4xx (no items, too many items, auth).
            ServerError: 504 (not scored within the service's deadline; ``.job_id`` is the
                batch's job) or 500.
            Overloaded, TransportError: After every retry (TransportError at once on a read
                timeout without ``idempotency_key``).
            ValueError: ``step``, ``policy_version`` or ``audit`` for a verifier other than
                the gateway (a verifier's envelope has no such field), or ``step`` not an
                integer >= 0.
        """
        body: dict[str, Any] = {"items": [item_json(item) for item in items]}
        body.update(_batch_fields(verifier, step, policy_version, audit))
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else None
        response = await self._request("POST", f"/v1/{verifier}/score", body=body, headers=headers)
        from tribunal.wire.envelope import ScoreResponse

        return ScoreResponse.model_validate_json(response.content).results

    async def score_json(
        self,
        verifier: str,
        items_json: Sequence[bytes],
        *,
        idempotency_key: str | None = None,
    ) -> list[dict[str, Any]]:
        """Score a batch of items given as JSON, and return the results as decoded JSON.

        For callers that hold items as JSON text and pass results on as JSON (``tribunal
        score``, the gateway): no item is encoded and no result is built into a model here.

        Args:
            verifier: As for :meth:`score`.
            items_json: One JSON object per item (UTF-8), sent as it is.
            idempotency_key: As for :meth:`score`.

        Returns:
            One result per item, in order: dicts of the ``ItemResult`` shape, as the service
            wrote them (not validated).

        Raises:
            ServerError: ``bad_response`` when the answer does not hold one result per item;
                otherwise as :meth:`score`.
        """
        headers = {"Content-Type": "application/json"}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        content = b'{"items":[' + b",".join(items_json) + b"]}"
        response = await self._request(
            "POST", f"/v1/{verifier}/score", content=content, headers=headers
        )
        try:
            results = loads(response.content)["results"]
        except (ValueError, KeyError, TypeError):
            results = None
        if not isinstance(results, list) or len(results) != len(items_json):
            raise ServerError(
                response.status_code,
                "bad_response",
                f"{self.base_url}/v1/{verifier}/score did not answer one result per item",
            )
        return results

    async def submit(
        self,
        verifier: str,
        items: Sequence[Item],
        *,
        idempotency_key: str | None = None,
        step: int | None = None,
        policy_version: str | None = None,
        audit: Item | None = None,
    ) -> str:
        """Queue a batch as a job (``POST /v1/jobs``) and return its id at once.

        Args:
            verifier: Which verifier scores the items.
            items: Dicts or wire models.
            idempotency_key: The same key with the same batch returns the same job (scored
                once), e.g. after a crash; with another batch it is a 409.
            step: The trainer's step of the batch (``gateway`` only): the gateway windows
                the job's audits and hack signatures by it (docs/audits.md); None: by time.
            policy_version: The policy that wrote the responses (``gateway`` only),
                recorded with their audits.
            audit: The auditor of the job's ``verifier`` items that name none of their own
                (``gateway`` only), as for :meth:`score`.

        Raises:
            RequestRejected: 4xx (409 idempotency_conflict, 413, 422 ...).
            Overloaded, TransportError: After every retry (TransportError at once on a read
                timeout without ``idempotency_key``).
            ValueError: ``step``, ``policy_version`` or ``audit`` for a verifier other than
                the gateway, or ``step`` not an integer >= 0.
        """
        body: dict[str, Any] = {
            "verifier": verifier,
            "items": [item_json(item) for item in items],
        }
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        body.update(_batch_fields(verifier, step, policy_version, audit))
        response = await self._request(
            "POST", "/v1/jobs", body=body, idempotent=idempotency_key is not None
        )
        from tribunal.wire.envelope import JobCreated

        return JobCreated.model_validate_json(response.content).job_id

    async def job(self, job_id: str, *, wait_s: float = 0.0) -> JobState:
        """Read a job (``GET /v1/jobs/{id}``), long-polling up to ``wait_s`` for it to finish.

        Returns:
            Its state: ``status``, ``completed`` / ``total`` and the results so far (None for
            pending items), in item order.

        Raises:
            JobNotFoundError: Unknown id, or its results expired.
        """
        params = {"wait": f"{wait_s:g}"} if wait_s > 0 else None
        response = await self._request("GET", f"/v1/jobs/{job_id}", params=params, wait_s=wait_s)
        from tribunal.wire.envelope import JobState

        return JobState.model_validate_json(response.content)

    async def wait(self, job_id: str, *, timeout_s: float | None = None) -> list[ItemResult]:
        """Long-poll a job until every item has its result.

        Args:
            job_id: From :meth:`submit`.
            timeout_s: Give up after this many seconds (None: wait as long as it takes).

        Returns:
            One result per item, in item order.

        Raises:
            JobTimeout: Not done within ``timeout_s`` (the job stays queued).
            JobNotFoundError: Unknown id, or its results expired.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            remaining = _MAX_WAIT_PER_POLL_S if deadline is None else deadline - time.monotonic()
            state = await self.job(job_id, wait_s=max(0.0, min(_MAX_WAIT_PER_POLL_S, remaining)))
            if state.status == "done":
                return _complete(state)
            if deadline is not None and time.monotonic() >= deadline:
                assert timeout_s is not None
                raise JobTimeout(job_id, state.completed, state.total, timeout_s)

    async def iter_results(
        self,
        job_id: str,
        *,
        timeout_s: float | None = None,
        poll_min_s: float = 0.05,
        poll_max_s: float = 1.0,
    ) -> AsyncIterator[tuple[int, ItemResult]]:
        """Yield ``(index, result)`` for each item of a job as soon as it is scored.

        A trainer can use a finished group while the rest of the job is scored. Each read is
        a long-poll of up to the current interval (it returns at once when the job is done);
        the interval starts at ``poll_min_s`` and doubles up to ``poll_max_s`` while nothing
        new arrives.

        Args:
            job_id: From :meth:`submit`.
            timeout_s: Give up after this many seconds (None: no limit).
            poll_min_s: Shortest interval between reads, seconds.
            poll_max_s: Longest interval between reads, seconds.

        Raises:
            JobTimeout: Not done within ``timeout_s``.
            JobNotFoundError: Unknown id, or its results expired.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        seen: set[int] = set()
        poll_s = poll_min_s
        while True:
            state = await self.job(job_id, wait_s=poll_s)
            fresh = [(i, r) for i, r in enumerate(state.results) if r is not None and i not in seen]
            for index, result in fresh:
                seen.add(index)
                yield index, result
            if state.status == "done":
                return
            if deadline is not None and time.monotonic() >= deadline:
                assert timeout_s is not None
                raise JobTimeout(job_id, state.completed, state.total, timeout_s)
            poll_s = poll_min_s if fresh else min(poll_max_s, poll_s * 2)

    async def run_code(self, item: RunItem | Mapping[str, Any]) -> RunDetails:
        """Run one program once in the code service's sandbox (``POST /v1/code/run``).

        The code-interpreter tool of agentic rollouts, outside the scoring envelope: no
        reward, no cache (each call runs the program again, a retried one too) and no batch.
        The client's URL must be the code service's.

        Args:
            item: A ``RunItem`` (``language``, ``code``, ``stdin``, ``limits``), or a dict of
                its fields in which ``id`` may be left out.

        Returns:
            The run: ``stdout`` and ``stderr`` (each capped, with its ``*_truncated`` flag),
            ``exit_code``, ``verdict`` (``accepted``: exit status 0 within the limits) and
            ``time_ms``. A program that fails is a run with its verdict, not an error.

        Raises:
            RequestRejected: 4xx, e.g. 422 ``bad_input`` with ``.field`` naming the field
                (``language``, ``code``, ``limits.timeout_s`` ...), or 401.
            ServerError: 500 ``sandbox_error`` (the sandbox failed, not the program;
                ``.retryable``), 504 ``timeout`` (not run within the service's deadline).
            Overloaded, TransportError: After every retry (TransportError at once on a read
                timeout: the program may be running).

        Examples:
            >>> async with TribunalClient("http://127.0.0.1:8102") as client:  # doctest: +SKIP
            ...     run = await client.run_code({"language": "python", "code": "print(6 * 7)"})
            ...     run.stdout, run.verdict
            ('42\\n', <TestVerdict.ACCEPTED: 'accepted'>)
        """
        response = await self._request("POST", "/v1/code/run", body=item_json(item))
        from tribunal.wire.code import RunDetails

        return RunDetails.model_validate_json(response.content)

    async def ready(self) -> bool:
        """Return True when ``GET /readyz`` answers 200 (one attempt, no retries)."""
        try:
            response = await self._http.get("/readyz")
        except httpx.TransportError:
            return False
        return response.status_code == 200

    # -- transport ----------------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content: bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        wait_s: float = 0.0,
        idempotent: bool = False,
    ) -> httpx.Response:
        """Send one request with retries; return a 2xx response or raise. ``body`` is sent
        as JSON; ``content`` as it is (with the caller's ``Content-Type``). ``idempotent``:
        sending it again cannot queue anything twice (an idempotency key in the body), so a
        read timeout is retried too, as for a GET or an ``Idempotency-Key`` header."""
        resend_after_read_timeout = (
            idempotent or method == "GET" or "Idempotency-Key" in (headers or {})
        )
        if body is not None:
            content = _json_body(body)
            headers = {"Content-Type": "application/json", **(headers or {})}
        timeout = self.timeout
        if wait_s > 0 and timeout.read is not None:
            timeout = httpx.Timeout(
                connect=timeout.connect,
                read=timeout.read + wait_s,
                write=timeout.write,
                pool=timeout.pool,
            )
        attempt = 0
        while True:
            failure: TransportError | APIError
            try:
                async with self._semaphore:
                    response = await self._http.request(
                        method,
                        path,
                        content=content,
                        headers=headers,
                        params=params,
                        timeout=timeout,
                    )
            except httpx.TransportError as exc:
                failure = TransportError(f"{method} {self.base_url}{path}: {exc!r}")
                if isinstance(exc, httpx.ReadTimeout) and not resend_after_read_timeout:
                    raise failure from exc
                # Keep the httpx error (its type tells a refused connection from a timeout);
                # `raise ... from` cannot, as the raise comes after the retries.
                failure.__cause__ = exc
                retry_after_s = None
            else:
                if response.status_code < 400:
                    return response
                failure = _api_error(response)
                if response.status_code not in _RETRY_STATUSES:
                    raise failure
                retry_after_s = failure.retry_after_s
            if attempt >= self.max_retries:
                raise failure
            attempt += 1
            await asyncio.sleep(self._backoff_s(attempt, retry_after_s))

    def _backoff_s(self, attempt: int, retry_after_s: float | None) -> float:
        base = min(self.backoff_max_s, self.backoff_s * 2.0 ** (attempt - 1))
        delay = base * (0.5 + random.random() / 2)  # jitter: a burst does not retry together
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, self.retry_after_max_s))
        return delay


def _json_body(body: Any) -> bytes:
    """``body`` as UTF-8 JSON; as ASCII JSON when a string holds a lone surrogate (which UTF-8
    cannot encode, and JSON can escape): the service then says which field it cannot take."""
    try:
        return json.dumps(body, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(body).encode()


def _complete(state: JobState) -> list[ItemResult]:
    results = [r for r in state.results if r is not None]
    if len(results) != state.total:  # pragma: no cover - a done job has every result
        raise ServerError(500, "internal_error", f"job {state.job_id} is done but incomplete")
    return results


def _api_error(response: httpx.Response) -> APIError:
    """Map an error answer to the client's tree (Tribunal's body, or any other server's)."""
    status = response.status_code
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
        field, retryable = error.get("field"), bool(error.get("retryable", False))
        job_id = error.get("job_id")
    except (ValueError, KeyError, TypeError):
        code, message, field, retryable = f"http_{status}", response.text[:500], None, False
        job_id = None
    retry_after_s = _retry_after_s(response.headers.get("Retry-After"))
    kind: type[APIError]
    if status in _RETRY_STATUSES:
        kind = Overloaded
    elif status == 404 and code == "job_not_found":
        kind = JobNotFoundError
    elif status < 500:
        kind = RequestRejected
    else:
        kind = ServerError
    return kind(
        status,
        code,
        message,
        field=field,
        retryable=retryable,
        retry_after_s=retry_after_s,
        job_id=job_id if isinstance(job_id, str) else None,
    )


def _retry_after_s(value: str | None) -> float | None:
    """``Retry-After`` in seconds: delta-seconds or an HTTP date (RFC 9110, 10.2.3)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
