"""The errors ``tribunal.client`` raises: one small tree, like httpx's ``_exceptions.py``.

::

    ClientError                     base of everything the client raises
    ├── TransportError              no HTTP answer (connect, read, write or pool timeout,
    │                               refused or reset connection) on every attempt (a read
    │                               timeout of an unkeyed batch: on the first)
    ├── APIError                    the service answered an error: .status, .code, .message,
    │   │                           .field, .retryable (the body ``{"error": {...}}``)
    │   ├── RequestRejected         4xx other than 429: the request is at fault; never retried
    │   │   └── JobNotFoundError    404 job_not_found: unknown job id, or its results expired
    │   ├── Overloaded              429 queue_full or 503 (queue or backend unavailable) on
    │   │                           every attempt; .retry_after_s is the last Retry-After
    │   └── ServerError             another 5xx (504 timeout of a synchronous score, 500)
    └── JobTimeout                  a job was not done within the client's deadline; it stays
                                    queued: ``wait(job_id)`` again later (.job_id)

Item failures are not exceptions: an item that could not be scored is an ``ItemResult``
with ``reward=None`` and an ``error`` (see :func:`tribunal.client.rewards`).
"""

from __future__ import annotations


class ClientError(Exception):
    """Base of every error ``tribunal.client`` raises."""


class TransportError(ClientError):
    """The service gave no HTTP answer (no connection, or a timeout) on any attempt; after a
    read timeout of a batch sent without an idempotency key, on the first (the service may be
    scoring it: sending it again could queue it twice). The last attempt's
    ``httpx.TransportError`` is its ``__cause__``."""


class APIError(ClientError):
    """The service answered with an error status.

    Attributes:
        status: HTTP status.
        code: Tribunal's error code (``bad_input``, ``queue_full`` ...; ``http_<status>``
            when the body is not Tribunal's).
        message: The service's message.
        field: The request field at fault (``items.3.ground_truth``), or None.
        retryable: What the service says about sending the same request again.
        retry_after_s: The ``Retry-After`` header in seconds, or None.
        job_id: The job that holds the batch when it was, or may have been, accepted
            before the error (a 504 of a synchronous score): ``wait(job_id)`` collects it.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        retryable: bool = False,
        retry_after_s: float | None = None,
        job_id: str | None = None,
    ) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.job_id = job_id


class RequestRejected(APIError):
    """A 4xx other than 429: the request is wrong (schema, auth, size, idempotency key)."""


class JobNotFoundError(RequestRejected):
    """404: no job has this id (never created, or its results expired)."""


class Overloaded(APIError):
    """429 or 503 on every attempt: the queue is full or a dependency is down."""


class ServerError(APIError):
    """A 5xx other than 503 (a synchronous score that timed out, an internal error)."""


class JobTimeout(ClientError):
    """A job was not done within the client's deadline; it is still queued.

    Attributes:
        job_id: The job, to wait for again.
        completed: Items done when the deadline passed.
        total: Items of the job.
    """

    def __init__(self, job_id: str, completed: int, total: int, timeout_s: float) -> None:
        super().__init__(
            f"job {job_id} not done within {timeout_s:g} s ({completed}/{total} items); "
            "it stays queued"
        )
        self.job_id = job_id
        self.completed = completed
        self.total = total
