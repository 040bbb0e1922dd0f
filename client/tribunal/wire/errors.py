"""The one error tree of Tribunal, and the table that maps it to HTTP.

Every error a caller can see is a :class:`TribunalError`. Its class attributes say what it
is (``code``), how it reaches HTTP when it fails a whole request (``http_status``) and
whether sending the same thing again can help (``retryable``)::

    TribunalError                    internal_error          500
    ├── BadInput                     bad_input               422
    ├── PayloadTooLarge              payload_too_large       413
    ├── Unauthorized                 unauthorized            401
    ├── JobNotFound                  job_not_found           404
    ├── IdempotencyConflict          idempotency_conflict    409
    ├── BudgetSpent                  budget_spent            402
    ├── QueueFull                    queue_full              429  retryable, Retry-After
    │   └── SessionsFull             sessions_full           429  retryable, Retry-After
    ├── SessionLost                  session_lost            410
    ├── BackendUnavailable           backend_unavailable     503  retryable, Retry-After
    │   └── QueueUnavailable         queue_unavailable       503  retryable, Retry-After
    ├── ScoringTimeout               timeout                 504  retryable
    ├── ParseError                   parse_error             502  retryable
    ├── Refusal                      refusal                 502
    ├── SandboxError                 sandbox_error           500  retryable
    ├── DeadLettered                 dead_letter             500
    ├── ConfigurationError           configuration_error     500
    └── InternalError                internal_error          500

Item-level errors never fail a batch: the worker turns a ``TribunalError`` raised for one
item into that item's ``error`` (see ``tribunal.wire.envelope.ItemError``) and the batch
still answers 200. Request-level errors reach HTTP through the one exception handler that
``tribunal.core.app.create_app`` registers. Built-in exceptions are never mapped to 4xx:
anything that is not a ``TribunalError`` is an ``InternalError``.
"""

from __future__ import annotations

from typing import Any, ClassVar


class TribunalError(Exception):
    """Base of every error Tribunal reports.

    Args:
        message: What went wrong, for a person; name the value or field at fault.
        field: The request field at fault, as a dotted path (``items.3.ground_truth``).
        retry_after_s: For retryable errors, how long a client should wait before retrying.
        job_id: The job that holds the request's batch when the error came after it was
            accepted (a synchronous score that timed out or lost the queue while waiting):
            the client collects the results with ``GET /v1/jobs/{job_id}``, not by resending.
    """

    code: ClassVar[str] = "internal_error"
    http_status: ClassVar[int] = 500
    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        retry_after_s: float | None = None,
        job_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s
        self.job_id = job_id

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as class, args and attributes, restored without calling ``__init__``.

        Exceptions pickle by calling ``cls(*args)`` again, which breaks on a subclass whose
        constructor takes more (or other) arguments than the message; restoring the
        attributes instead brings back every field (``field``, ``retry_after_s``, a
        subclass's own), so that an error raised in a pool process reaches the parent as the
        same error.
        """
        return (_restore, (type(self), self.args, dict(self.__dict__)))


def _restore(
    cls: type[TribunalError], args: tuple[Any, ...], state: dict[str, Any]
) -> TribunalError:
    """Rebuild a pickled ``TribunalError`` (see ``TribunalError.__reduce__``)."""
    error = cls.__new__(cls, *args)
    error.__dict__.update(state)
    return error


class BadInput(TribunalError):
    """The request or one item of it is malformed or inconsistent (the client's fault)."""

    code = "bad_input"
    http_status = 422


class PayloadTooLarge(TribunalError):
    """The request exceeds the batch limit (items per request or bytes per request)."""

    code = "payload_too_large"
    http_status = 413


class Unauthorized(TribunalError):
    """A bearer token is required (``TRIBUNAL_API_KEY`` is set) and was missing or wrong."""

    code = "unauthorized"
    http_status = 401


class JobNotFound(TribunalError):
    """No job has this id (never created, or its results expired)."""

    code = "job_not_found"
    http_status = 404


class IdempotencyConflict(TribunalError):
    """An idempotency key was reused for a different batch."""

    code = "idempotency_conflict"
    http_status = 409


class BudgetSpent(TribunalError):
    """A reward spec's items spent its ``budget_usd`` on model calls: its batches are refused
    (never paid a default) until its budget is raised."""

    code = "budget_spent"
    http_status = 402


class QueueFull(TribunalError):
    """The verifier's queue is at its bound; retry after ``retry_after_s``."""

    code = "queue_full"
    http_status = 429
    retryable = True


class SessionsFull(QueueFull):
    """A code-interpreter session was refused: the worker that took the request holds its
    cap of sessions (``TRIBUNAL_CODE_MAX_SESSIONS``); retry after ``retry_after_s``."""

    code = "sessions_full"


class SessionLost(TribunalError):
    """A code-interpreter session is gone: its worker stopped or died, it idled past its
    TTL, spent its budget, was closed, or its interpreter died. Its state is lost; a new
    session starts empty (never silently in its place)."""

    code = "session_lost"
    http_status = 410


class BackendUnavailable(TribunalError):
    """A backend Tribunal depends on (a judge model server, ...) cannot be reached."""

    code = "backend_unavailable"
    http_status = 503
    retryable = True


class QueueUnavailable(BackendUnavailable):
    """The queue (Redis) cannot be reached; the API stays up and answers 503 meanwhile."""

    code = "queue_unavailable"


class ScoringTimeout(TribunalError):
    """Scoring an item overran its hard deadline; the process doing it was killed."""

    code = "timeout"
    http_status = 504
    retryable = True


class ParseError(TribunalError):
    """A backend answered, but its answer could not be read (e.g. no readable verdict)."""

    code = "parse_error"
    http_status = 502
    retryable = True


class Refusal(TribunalError):
    """A model backend refused to grade (content filter, refusal text)."""

    code = "refusal"
    http_status = 502


class SandboxError(TribunalError):
    """The sandbox failed to run the program for a reason that is not the program's fault."""

    code = "sandbox_error"
    http_status = 500
    retryable = True


class DeadLettered(TribunalError):
    """An item was delivered more than ``max_deliveries`` times (it keeps killing workers)."""

    code = "dead_letter"
    http_status = 500


class ConfigurationError(TribunalError):
    """A service cannot start safely with its configuration (e.g. it cannot isolate code)."""

    code = "configuration_error"
    http_status = 500


class InternalError(TribunalError):
    """A bug in Tribunal: anything that is not one of the errors above."""

    code = "internal_error"
    http_status = 500


ALL_ERRORS: tuple[type[TribunalError], ...] = (
    TribunalError,
    BadInput,
    PayloadTooLarge,
    Unauthorized,
    JobNotFound,
    IdempotencyConflict,
    BudgetSpent,
    QueueFull,
    SessionsFull,
    SessionLost,
    BackendUnavailable,
    QueueUnavailable,
    ScoringTimeout,
    ParseError,
    Refusal,
    SandboxError,
    DeadLettered,
    ConfigurationError,
    InternalError,
)
"""Every class of the tree, for the test that walks it and for OpenAPI."""

ERRORS_BY_CODE: dict[str, type[TribunalError]] = {cls.code: cls for cls in ALL_ERRORS}
"""The class of each wire ``code``, to raise an error read from a result or an answer again
(``internal_error`` is :class:`InternalError`, listed after the base class that shares it)."""

INFRASTRUCTURE_CODES: frozenset[str] = frozenset(
    {BackendUnavailable.code, QueueFull.code, QueueUnavailable.code}
)
"""Item error classes that are the infrastructure's (a verifier down or full), which no item
causes and a retry may cure: a spec's ``on_error: renormalize`` drops them, and routes that
pay a failed item a reward (a trainer with no missing value) refuse or retry them instead."""
