"""Requests-per-minute and tokens-per-minute limits of an LLM backend, waited for, never failed.

A hosted judge (or a shared vLLM behind a quota proxy) answers HTTP 429 past its per-minute
quotas; retrying a 429 wastes the attempt and the backoff. A backend with
``requests_per_minute`` or ``tokens_per_minute`` set asks its limiter for room before every
HTTP attempt (retries count: each is a request the provider counts), and waits until there
is some.

The window is a sliding one (a log of admissions over the last 60 s), not a bucket that
refills continuously: at most ``requests_per_minute`` admissions fall inside any 60 s, which
is what a provider's quota counts. verl's ``rate_limited`` reward manager
(``verl/experimental/reward_loop/reward_manager/limited.py`` at volcengine/verl
b178a3cd56f58b2d502255daba591e92833930a7) has the same two limits as token buckets holding
one second's worth, per process (its class-level buckets are shared by the instances of one
process only); here they hold across every worker process of every service that calls the
same server and model, through Redis.

Tokens are counted before the call, when the provider's count is not known yet: an estimate
of ``ceil(prompt characters / 4) + max_tokens`` (the prompt at ~4 characters a token, the
completion at its budget), settled to the usage the server reports once it answers, so that
the window holds what was billed. A call whose estimate alone exceeds ``tokens_per_minute``
is admitted into an empty window (it could never fit otherwise; verl lets its bucket go
negative for the same reason).

Two limiters: :class:`LocalLimiter` (one process: the embedded memory queue, a backend used
without a queue) and :class:`RedisLimiter` (a Lua script that checks and records an
admission atomically, on Redis's own clock, so workers on hosts whose clocks differ agree).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from redis.exceptions import RedisError

from tribunal.core.metrics import LATENCY_BUCKETS_S, Tally
from tribunal.llm.config import BackendConfig
from tribunal.wire.errors import QueueUnavailable

logger = logging.getLogger(__name__)

WINDOW_S = 60.0
"""The providers' window: limits are per minute."""
CHARS_PER_TOKEN = 4
"""Prompt characters counted as one token before the server has counted them."""
_MIN_WAIT_S = 0.005
"""Shortest wait before asking again (an admission expiring in 0 ms is expired next time)."""


@dataclass(frozen=True)
class RateLimits:
    """A backend's limits over a sliding window.

    Attributes:
        requests: Most HTTP requests admitted in any window, or None (no limit).
        tokens: Most tokens (prompt + completion) admitted in any window, or None.
        window_s: The window (s); 60 for per-minute limits (tests use shorter ones).
    """

    requests: int | None = None
    tokens: int | None = None
    window_s: float = WINDOW_S

    @property
    def active(self) -> bool:
        """Whether any limit is set."""
        return self.requests is not None or self.tokens is not None


def rate_limits(config: BackendConfig) -> RateLimits:
    """The per-minute limits a backend's settings name."""
    return RateLimits(requests=config.requests_per_minute, tokens=config.tokens_per_minute)


def estimate_tokens(messages: Sequence[Any], max_tokens: int) -> int:
    """Tokens a call is counted for before the server answers (see the module docstring).

    Args:
        messages: The request's chat messages (``{"role", "content"}`` mappings).
        max_tokens: The request's completion budget.
    """
    chars = sum(len(m.get("content", "") or "") for m in messages)
    return math.ceil(chars / CHARS_PER_TOKEN) + max_tokens


class CallLimiter(Protocol):
    """Admits calls to one backend within its :class:`RateLimits`."""

    limits: RateLimits

    async def acquire(self, tokens: int) -> str:
        """Wait until a call of ``tokens`` fits, record it, and return its ticket."""
        ...

    async def settle(self, ticket: str, tokens: int) -> None:
        """Replace the ticket's estimate with the ``tokens`` the server reported."""
        ...


def _observe_wait(tally: Tally | None, waited_s: float) -> None:
    """Count a limited call in ``backend_rate_wait`` (seconds it waited for room, 0 included)."""
    if tally is not None:
        tally.observe("backend_rate_wait", waited_s, LATENCY_BUCKETS_S)


class LocalLimiter:
    """Admissions of one process, in a log of (time, ticket, tokens).

    Args:
        limits: The limits; at least one set.
        tally: Where each limited call's wait is observed (the verifier's backend meter).
    """

    def __init__(self, limits: RateLimits, tally: Tally | None = None) -> None:
        self.limits = limits
        self.tally = tally
        self._log: deque[tuple[float, str]] = deque()
        self._tokens: dict[str, int] = {}
        self._used = 0
        self._lock = asyncio.Lock()

    async def acquire(self, tokens: int) -> str:
        """Wait (in ``asyncio.sleep``) until the call fits; record it."""
        started = time.monotonic()
        while True:
            async with self._lock:
                now = time.monotonic()
                while self._log and self._log[0][0] <= now - self.limits.window_s:
                    _, old = self._log.popleft()
                    self._used -= self._tokens.pop(old)
                wait_s = _wait_s(self.limits, len(self._log), self._used, tokens)
                if wait_s is None:
                    ticket = uuid.uuid4().hex
                    self._log.append((now, ticket))
                    self._tokens[ticket] = tokens
                    self._used += tokens
                    _observe_wait(self.tally, now - started)
                    return ticket
                wait_s = self._log[0][0] + self.limits.window_s - now
            await asyncio.sleep(max(wait_s, _MIN_WAIT_S))

    async def settle(self, ticket: str, tokens: int) -> None:
        """Count the reported tokens (nothing if the admission has left the window)."""
        async with self._lock:
            if ticket in self._tokens:
                self._used += tokens - self._tokens[ticket]
                self._tokens[ticket] = tokens


def _wait_s(limits: RateLimits, count: int, used: int, tokens: int) -> float | None:
    """None if a call of ``tokens`` fits beside ``count`` admissions of ``used`` tokens, else
    0.0 (the caller computes how long until the oldest leaves)."""
    if limits.requests is not None and count >= limits.requests:
        return 0.0
    if limits.tokens is not None and count > 0 and used + tokens > limits.tokens:
        return 0.0
    return None


# KEYS[1]: sorted set of admissions (member: the ticket "<id>|<tokens>", score: Redis time
# in ms); KEYS[2]: tokens of the admissions in the set. ARGV: window ms, max requests, max
# tokens (0: none), the call's tokens, its ticket. Returns {1, 0} (admitted) or {0, ms to wait}.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - window)
for _, member in ipairs(expired) do
  used = used - tonumber(string.match(member, '|(%d+)$'))
end
if #expired > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
end
if used < 0 then used = 0 end
local count = redis.call('ZCARD', KEYS[1])
local max_requests = tonumber(ARGV[2])
local max_tokens = tonumber(ARGV[3])
local tokens = tonumber(ARGV[4])
if (max_requests > 0 and count >= max_requests)
    or (max_tokens > 0 and count > 0 and used + tokens > max_tokens) then
  if #expired > 0 then redis.call('SET', KEYS[2], used, 'KEEPTTL') end
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(oldest[2]) + window - now}
end
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('SET', KEYS[2], used + tokens, 'PX', window)
redis.call('PEXPIRE', KEYS[1], window)
return {1, 0}
"""

# KEYS as _ACQUIRE; ARGV: the ticket ("<id>|<estimate>", its member), the reported tokens,
# their difference from the estimate. An admission that has left the window is not counted
# any more: nothing to settle.
_SETTLE = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], score, string.match(ARGV[1], '^[^|]+') .. '|' .. ARGV[2])
redis.call('INCRBY', KEYS[2], ARGV[3])
return 1
"""


def limit_key_stem(prefix: str, base_url: str, model: str) -> str:
    """The Redis key stem of one backend's admissions: ``<prefix>:llm:<digest>``.

    The digest is of the server's URL and the model, so every service (the judge, the
    citation scorer) and worker calling the same model on the same server shares one window.
    """
    digest = hashlib.sha256(f"{base_url.rstrip('/')}\n{model}".encode()).hexdigest()[:16]
    return f"{prefix}:llm:{digest}"


class RedisLimiter:
    """Admissions shared by every process on one Redis (see the module docstring).

    Args:
        redis: A ``redis.asyncio.Redis`` client with ``decode_responses=True`` (the queue's).
        stem: Key stem (:func:`limit_key_stem`); ``<stem>:admitted`` and ``<stem>:tokens``.
        limits: The limits; at least one set.
        tally: Where each limited call's wait is observed.
    """

    def __init__(
        self, redis: Any, stem: str, limits: RateLimits, tally: Tally | None = None
    ) -> None:
        self.limits = limits
        self.tally = tally
        self.keys = [f"{stem}:admitted", f"{stem}:tokens"]
        self._acquire = redis.register_script(_ACQUIRE)
        self._settle = redis.register_script(_SETTLE)

    async def acquire(self, tokens: int) -> str:
        """Wait (in ``asyncio.sleep``) until the call fits on every worker's count; record it.

        Returns:
            The ticket, ``<id>|<tokens>`` (the admission's member in Redis: it carries its
            estimate, so an attempt that fails leaves nothing behind in this process).

        Raises:
            QueueUnavailable: Redis does not answer (retryable: the call is not made).
        """
        ticket = f"{uuid.uuid4().hex}|{tokens}"
        window_ms = round(self.limits.window_s * 1000)
        args = [window_ms, self.limits.requests or 0, self.limits.tokens or 0, tokens, ticket]
        started = time.monotonic()
        while True:
            try:
                admitted, wait_ms = await self._acquire(keys=self.keys, args=args)
            except RedisError as exc:
                raise QueueUnavailable(
                    f"the LLM rate limiter's Redis does not answer ({exc}); the call was not made"
                ) from None
            if int(admitted):
                _observe_wait(self.tally, time.monotonic() - started)
                return ticket
            await asyncio.sleep(max(int(wait_ms) / 1000, _MIN_WAIT_S))

    async def settle(self, ticket: str, tokens: int) -> None:
        """Count the reported tokens in place of the estimate (a Redis that does not answer
        leaves the estimate: the call has been made and answered already)."""
        estimate = int(ticket.rpartition("|")[2])
        if estimate != tokens:
            try:
                await self._settle(keys=self.keys, args=[ticket, tokens, tokens - estimate])
            except RedisError as exc:
                logger.warning("the LLM rate limiter kept an estimate: Redis failed (%s)", exc)


def meter_limits(backend: Any, tally: Tally) -> None:
    """Observe the waits of ``backend``'s limiter (if it has one) in ``tally``."""
    limiter = getattr(backend, "limiter", None)
    if isinstance(limiter, LocalLimiter | RedisLimiter):
        limiter.tally = tally


def share_limits(backend: Any, redis: Any, prefix: str) -> None:
    """Make ``backend``'s limits (if it has any) hold across every process on ``redis``.

    Args:
        backend: A started backend; one without a limiter (none set, or a kind that sends
            no requests) is left alone.
        redis: The queue's ``redis.asyncio.Redis`` client (``decode_responses=True``).
        prefix: The queue's key prefix (``TRIBUNAL_KEY_PREFIX``).
    """
    limiter = getattr(backend, "limiter", None)
    if isinstance(limiter, LocalLimiter):
        stem = limit_key_stem(prefix, backend.config.base_url, backend.model)
        backend.limiter = RedisLimiter(redis, stem, limiter.limits, limiter.tally)
