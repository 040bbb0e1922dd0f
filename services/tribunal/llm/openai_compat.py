"""LLM backend for any OpenAI-compatible chat-completions server (vLLM, SGLang, hosted).

Request (``POST {base_url}/chat/completions``)::

    model, messages, max_tokens, temperature, seed, n=1,
    response_format = {"type": "json_schema",
                       "json_schema": {"name": schema_name, "schema": ...}}
                      (or {"type": "json_object"}, or absent: ``structured_output``),
    logprobs = true, top_logprobs = K        (when ``logprobs`` is on),
    chat_template_kwargs = {...}             (when set; vLLM / SGLang only)

Load: at most ``max_concurrency`` requests are in flight. Calls beyond that wait on an
``asyncio.Semaphore`` *in front of* the aiohttp client, whose connection pool is sized to
the same limit, so the pool never holds a queue of thousands of requests (NeMo Gym saw a
40-minute stall from httpcore's O(n²) pool assignment at 16,000 queued requests; see
NVIDIA-NeMo/Gym ``engineering-notes/aiohttp-vs-httpx.mdx``).

Rate: with ``requests_per_minute`` or ``tokens_per_minute`` set, every attempt first waits
for room in the backend's :attr:`OpenAICompatBackend.limiter` (``tribunal.llm.limits``),
outside the semaphore, so a call waiting for the next minute holds no slot.

Retries: 429, 5xx, timeouts and connection errors are retried ``max_retries`` times with
exponential backoff and jitter (a longer ``Retry-After`` wins); the semaphore is released
while waiting. Other 4xx are not retried: a context-length error is ``BadInput`` and a
content filter's refusal ``Refusal`` (both the item's, as each server words them:
:data:`CONTEXT_WORDINGS`, :data:`CONTENT_FILTER_WORDINGS`), anything else (bad key, unknown
model, unsupported parameter) is ``ConfigurationError``.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import math
import random
from typing import Any

import aiohttp

from tribunal.llm.base import JSON_TOKEN_PUNCTUATION, Completion, CompletionRequest, TokenLogprob
from tribunal.llm.config import BackendConfig
from tribunal.llm.limits import CallLimiter, LocalLimiter, estimate_tokens, rate_limits
from tribunal.llm.tokens import model_family, read_added_tokens, tokens_in_config
from tribunal.wire.errors import (
    BackendUnavailable,
    BadInput,
    ConfigurationError,
    ParseError,
    Refusal,
    ScoringTimeout,
    TribunalError,
)

logger = logging.getLogger(__name__)

_RETRY_AFTER_CAP_S = 60.0
_TOKENIZER_INFO_TIMEOUT_S = 2.0
"""How long start waits for the server's ``/tokenizer_info`` (a server not up yet is refused
at once; the warning says what is not known)."""
_STREAM_BYTES = 256 * 1024
"""Request bodies past this size are sent as a stream (aiohttp warns at 1 MiB of bytes)."""
_INLINE_CHARS = 16_384
"""Prompt characters up to which a request body is encoded on the event loop (well under a
millisecond); above, in a thread."""
CONTEXT_WORDINGS: tuple[tuple[str, str], ...] = (
    ("vLLM, OpenAI", "maximum context length"),  # "This model's maximum context length is N"
    ("vLLM", "max_model_len"),
    ("SGLang, vLLM", "longer than the model's context length"),  # "The input (N tokens) is …"
    ("SGLang", "exceeds the model's maximum context length"),
    ("TGI", "`inputs` tokens + `max_new_tokens` must be <="),  # ValidationError::MaxTotalTokens
    ("TGI", "`inputs` must have less than"),  # ValidationError::InputLength
    ("llama.cpp", "exceeds the available context size"),  # "request (N tokens) exceeds …"
    ("llama.cpp", "exceed_context_size_error"),
    ("OpenAI, Azure OpenAI", "context_length_exceeded"),
    ("Anthropic", "prompt is too long"),  # "prompt is too long: N tokens > M maximum"
    ("any", "context length"),
    ("any", "context_length"),
    ("any", "maximum context"),
    ("any", "too long"),
)
"""(server, lower-cased wording) of a 4xx that says the prompt does not fit the model's
context: the item's fault (``BadInput``), never the deployment's configuration."""

CONTENT_FILTER_WORDINGS: tuple[tuple[str, str], ...] = (
    ("Azure OpenAI", "content management policy"),  # "… triggering Azure OpenAI's content …"
    ("Azure OpenAI", "responsibleaipolicyviolation"),  # its innererror code
    ("Azure OpenAI", '"content_filter"'),  # its error code
    ("OpenAI", "flagged as potentially violating our usage policy"),  # code invalid_prompt
    ("OpenAI", "content_policy_violation"),
    ("OpenAI", "rejected as a result of our safety system"),
)
"""(server, lower-cased wording) of a 4xx that says a provider's content filter refused the
prompt: the item's ``Refusal``, never the deployment's configuration."""


class _Retryable(Exception):
    """An attempt failed in a way that another attempt may fix."""

    def __init__(self, error: TribunalError, retry_after_s: float | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after_s = retry_after_s


class OpenAICompatBackend:
    """Chat-completions client with a concurrency bound, per-attempt deadline and retries.

    Args:
        config: Backend settings; ``base_url`` and ``model`` are required.
    """

    kind = "openai"

    def __init__(self, config: BackendConfig) -> None:
        if not config.base_url:
            raise ValueError("the openai backend needs base_url")
        self.config = config
        self.model = config.model
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self._session: aiohttp.ClientSession | None = None
        self._semaphore = asyncio.Semaphore(config.max_concurrency)
        self.in_flight = 0
        """Requests currently inside the semaphore (for metrics and tests)."""
        self._learned: tuple[str, ...] = ()
        self._warned = False
        limits = rate_limits(config)
        self.limiter: CallLimiter | None = LocalLimiter(limits) if limits.active else None
        """Admits each attempt within the per-minute limits (None: none set); one process's
        until a caller hands it one shared through Redis."""

    @property
    def control_tokens(self) -> tuple[str, ...]:
        """The configured ones, and once started those of ``tokenizer_path``'s files (a
        chat-completions server does not show its tokenizer)."""
        return tuple(sorted({*self.config.control_tokens, *self._learned}))

    async def start(self) -> None:
        """Learn the served model's added tokens: from ``tokenizer_path``'s files, else from
        the server's ``GET /tokenizer_info`` (vLLM, one try of at most
        :data:`_TOKENIZER_INFO_TIMEOUT_S`), else warn, naming the model's family, that only
        the built-in families' are known; and open the HTTP session (no chat request is
        made: the server may come up later).

        Raises:
            ConfigurationError: ``tokenizer_path`` is set but names no readable tokenizer.
        """
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self.config.max_concurrency, limit_per_host=self.config.max_concurrency
            )
            headers = {"Content-Type": "application/json"}
            if self.config.api_key:
                headers["Authorization"] = f"Bearer {self.config.api_key}"
            self._session = aiohttp.ClientSession(connector=connector, headers=headers)
        if self._learned or self._warned:
            return
        if self.config.tokenizer_path:
            self._learned = await asyncio.to_thread(read_added_tokens, self.config.tokenizer_path)
            return
        self._learned = await self._tokenizer_info()
        if not self._learned:
            self._warned = True
            family, covered = model_family(self.model)
            logger.warning(
                "the served model's own control tokens are not known (family: %s; %s): set "
                "TOKENIZER_PATH to its tokenizer files, serve vLLM with "
                "--enable-tokenizer-info-endpoint, or list them in CONTROL_TOKENS",
                family,
                "the built-in families cover its template"
                if covered
                else "the built-in families do NOT cover it: its tokens reach it raw",
            )

    async def _tokenizer_info(self) -> tuple[str, ...]:
        """The added tokens of vLLM's ``GET /tokenizer_info`` (the tokenizer's config), or ()
        where the server does not answer it."""
        assert self._session is not None
        root = self.config.base_url.rstrip("/").removesuffix("/v1") if self.config.base_url else ""
        timeout = aiohttp.ClientTimeout(total=_TOKENIZER_INFO_TIMEOUT_S)
        try:
            async with self._session.get(f"{root}/tokenizer_info", timeout=timeout) as resp:
                if resp.status != 200:
                    return ()
                return tokens_in_config(await resp.json(content_type=None))
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return ()

    async def aclose(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def request_body(self, request: CompletionRequest) -> dict[str, Any]:
        """Return the JSON body of one call (public so tests and docs can show it)."""
        cfg = self.config
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": cfg.temperature if request.temperature is None else request.temperature,
            "n": 1,
        }
        seed = cfg.seed if request.seed is None else request.seed
        if seed is not None:
            body["seed"] = seed
        if cfg.structured_output == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": dict(request.schema)},
            }
        elif cfg.structured_output == "json_object":
            body["response_format"] = {"type": "json_object"}
        if cfg.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = cfg.top_logprobs
        if cfg.chat_template_kwargs:
            body["chat_template_kwargs"] = dict(cfg.chat_template_kwargs)
        return body

    async def complete(self, request: CompletionRequest) -> Completion:
        """Run one call with retries.

        Raises:
            BackendUnavailable: Unreachable, 429 or 5xx on every attempt.
            ScoringTimeout: Every attempt overran ``timeout_s``.
            BadInput: The prompt exceeds the model's context.
            ConfigurationError: Any other 4xx (key, model, parameters).
            ParseError: A 200 whose body is not a chat completion.
        """
        if self._session is None:
            await self.start()
        body = self.request_body(request)
        # Encoded once for every attempt, and off the event loop where the prompt is large
        # (a judge item at its size limit is ~600,000 characters: ~10 ms of json.dumps).
        size = sum(len(m.get("content", "")) for m in request.messages)
        payload = _encode(body) if size <= _INLINE_CHARS else await asyncio.to_thread(_encode, body)
        attempts = self.config.max_retries + 1
        estimate = estimate_tokens(request.messages, request.max_tokens)
        last: _Retryable | None = None
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(self._backoff_s(attempt, last))
            try:
                return await self._limited_attempt(payload, request.verdict_tokens, estimate)
            except _Retryable as exc:
                last = exc
                logger.debug("LLM call attempt %d/%d failed: %s", attempt + 1, attempts, exc)
        assert last is not None
        error = last.error
        note = f" (after {attempts} attempt{'s' if attempts > 1 else ''})"
        raise type(error)(error.message + note, retry_after_s=error.retry_after_s)

    def _backoff_s(self, attempt: int, last: _Retryable | None) -> float:
        base = min(self.config.backoff_max_s, self.config.backoff_s * 2.0 ** (attempt - 1))
        delay = base * (0.5 + random.random() / 2)  # jitter: spread retries of a burst
        if last is not None and last.retry_after_s:
            delay = max(delay, min(last.retry_after_s, _RETRY_AFTER_CAP_S))
        return delay

    async def _limited_attempt(
        self, payload: bytes, verdict_tokens: tuple[str, ...], estimate: int
    ) -> Completion:
        """One attempt once the limiter admits it; its tokens settled to the reported usage."""
        if self.limiter is None:
            return await self._attempt(payload, verdict_tokens)
        ticket = await self.limiter.acquire(estimate)
        completion = await self._attempt(payload, verdict_tokens)
        used = completion.prompt_tokens + completion.completion_tokens
        if used:  # a server that reports no usage keeps the estimate
            await self.limiter.settle(ticket, used)
        return completion

    async def _attempt(self, payload: bytes, verdict_tokens: tuple[str, ...]) -> Completion:
        assert self._session is not None
        timeout = aiohttp.ClientTimeout(total=self.config.timeout_s)
        async with self._semaphore:
            self.in_flight += 1
            try:
                # A large body as a stream, which aiohttp writes in chunks between which the
                # loop runs other work; a small one as bytes (the cheaper payload).
                sent: bytes | io.BytesIO = (
                    io.BytesIO(payload) if len(payload) > _STREAM_BYTES else payload
                )
                async with self._session.post(self.url, data=sent, timeout=timeout) as resp:
                    if resp.status == 200:
                        data = await resp.json(content_type=None)
                        return _completion_from(data, verdict_tokens)
                    text = (await resp.text())[:500]
                    _raise_for_status(resp.status, text, resp.headers.get("Retry-After"))
                    raise AssertionError("unreachable")  # pragma: no cover
            except TimeoutError:
                raise _Retryable(
                    ScoringTimeout(f"LLM call exceeded {self.config.timeout_s:g} s")
                ) from None
            except aiohttp.ClientError as exc:
                raise _Retryable(
                    BackendUnavailable(f"LLM backend at {self.url} unreachable: {exc!r}"[:500])
                ) from None
            except ValueError as exc:  # a 200 whose body is not JSON
                raise ParseError(f"LLM backend answered a non-JSON body: {exc}") from None
            finally:
                self.in_flight -= 1


def _encode(body: dict[str, Any]) -> bytes:
    """The JSON body of a request (``json``'s escapes: a lone surrogate in a graded text is
    sent as ``\\udXXX``, which orjson would refuse)."""
    return json.dumps(body).encode()


def _raise_for_status(status: int, text: str, retry_after: str | None) -> None:
    if status == 429 or status >= 500:
        delay = _seconds(retry_after)
        raise _Retryable(
            BackendUnavailable(f"LLM backend answered HTTP {status}: {text}", retry_after_s=delay),
            delay,
        )
    lowered = text.lower()
    if status in (400, 413, 422) and any(w in lowered for _, w in CONTEXT_WORDINGS):
        raise BadInput(f"the prompt does not fit the model's context: {text}")
    if status in (400, 403, 422) and any(w in lowered for _, w in CONTENT_FILTER_WORDINGS):
        raise Refusal(f"the provider's content filter refused the prompt: {text}")
    raise ConfigurationError(f"LLM backend rejected the request with HTTP {status}: {text}")


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None  # an HTTP-date Retry-After: fall back to our own backoff


def _completion_from(data: Any, verdict_tokens: tuple[str, ...]) -> Completion:
    try:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        logprobs = choice.get("logprobs")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            # Content parts (a list) or an object: not an answer we can read as text.
            raise ParseError(
                f"LLM backend answered a message content of type {type(content).__name__}, "
                "not a string"
            )
        refusal = message.get("refusal")
        return Completion(
            text=content or "",
            finish_reason=_str_or_none(choice.get("finish_reason")),
            tokens=_tokens_from(
                logprobs.get("content") if isinstance(logprobs, dict) else None, verdict_tokens
            ),
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            refusal=None if refusal is None else str(refusal),
        )
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ParseError(f"LLM backend answered a body that is not a completion: {exc!r}") from None


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _count(value: Any) -> int:
    """A usage count; what is not a non-negative integer counts as unknown (0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _logprob(value: Any) -> float:
    """A log-probability; null or a non-number is NaN (skipped by every reader)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return math.nan


def _tokens_from(content: Any, verdict_tokens: tuple[str, ...]) -> tuple[TokenLogprob, ...] | None:
    """Per-token log-probabilities; alternatives are kept only on tokens that are a verdict
    (once JSON punctuation is stripped): a reason of 60 tokens x 5 alternatives is otherwise
    parsed for nothing.

    Log-probabilities only refine a written verdict, so a malformed block never costs the
    verdict: a token that is not a string drops them all (None: the written verdict is
    used), a null log-probability is NaN and an alternative without a token is skipped.
    """
    if not content or not isinstance(content, list):
        return None
    out = []
    for t in content:
        text = t.get("token") if isinstance(t, dict) else None
        if not isinstance(text, str):
            return None
        top: tuple[tuple[str, float], ...] = ()
        if text.strip(JSON_TOKEN_PUNCTUATION) in verdict_tokens:
            alternatives = t.get("top_logprobs")
            top = tuple(
                (a["token"], _logprob(a.get("logprob")))
                for a in (alternatives if isinstance(alternatives, list) else ())
                if isinstance(a, dict) and isinstance(a.get("token"), str)
            )
        out.append(TokenLogprob(token=text, logprob=_logprob(t.get("logprob")), top=top))
    return tuple(out)
