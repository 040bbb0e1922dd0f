"""The openai backend against a real HTTP server: parameters, retries, limits, failures."""

from __future__ import annotations

import asyncio
import re
from collections import deque
from typing import Any

import pytest

from tribunal.judge.prompts import build_prompt, build_request
from tribunal.llm.base import CompletionRequest
from tribunal.llm.config import BackendConfig
from tribunal.llm.openai_compat import OpenAICompatBackend
from tribunal.llm.testing import FakeOpenAIServer
from tribunal.testing.stack import free_port
from tribunal.wire.errors import (
    BackendUnavailable,
    BadInput,
    ConfigurationError,
    Refusal,
    ScoringTimeout,
)
from tribunal.wire.rubrics import Rubric


def _request(text: str = "criterion") -> CompletionRequest:
    prompt = build_prompt("Q", "R", [Rubric(text)])
    return build_request(prompt, 300, max_tokens=64)


def _backend(url: str, **kw: object) -> OpenAICompatBackend:
    fields: dict[str, object] = {
        "kind": "openai",
        "model": "fake-judge",
        "base_url": url,
        "max_retries": 2,
        "backoff_s": 0.01,
        "backoff_max_s": 0.02,
        "timeout_s": 5.0,
    }
    fields.update(kw)
    return OpenAICompatBackend(BackendConfig(**fields))  # type: ignore[arg-type]


async def test_request_parameters(openai_compat_server: FakeOpenAIServer) -> None:
    backend = _backend(openai_compat_server.base_url, api_key="sk-test", seed=7)
    await backend.start()
    try:
        completion = await backend.complete(_request())
    finally:
        await backend.aclose()
    assert completion.tokens is not None and completion.prompt_tokens > 0
    body = openai_compat_server.stats.requests[0]
    assert body["model"] == "fake-judge" and body["temperature"] == 0.0 and body["seed"] == 7
    assert body["response_format"]["type"] == "json_schema"
    [key] = body["response_format"]["json_schema"]["schema"]["required"]
    assert re.fullmatch(r"r1_[0-9a-f]{8}", key)
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


async def test_hosted_api_shape(openai_compat_server: FakeOpenAIServer) -> None:
    backend = _backend(
        openai_compat_server.base_url,
        structured_output="json_object",
        logprobs=False,
        chat_template_kwargs=(),
    )
    await backend.complete(_request())
    await backend.aclose()
    body = openai_compat_server.stats.requests[0]
    assert body["response_format"] == {"type": "json_object"}
    assert "logprobs" not in body and "chat_template_kwargs" not in body


@pytest.mark.parametrize("fault", ["429", "500", "timeout"])
async def test_retries_retryable_failures(
    openai_compat_server: FakeOpenAIServer, fault: str
) -> None:
    openai_compat_server.script.faults = deque([fault, fault])
    openai_compat_server.script.hang_s = 1.0
    backend = _backend(openai_compat_server.base_url, timeout_s=0.3)
    completion = await backend.complete(_request())
    await backend.aclose()
    assert '"verdict": 2' in completion.text
    assert len(openai_compat_server.stats.requests) == 3  # two failures, then success


@pytest.mark.parametrize(
    ("fault", "error"),
    [("429", BackendUnavailable), ("500", BackendUnavailable), ("timeout", ScoringTimeout)],
)
async def test_gives_up_after_retries(
    openai_compat_server: FakeOpenAIServer, fault: str, error: type[Exception]
) -> None:
    openai_compat_server.script.faults = deque([fault] * 5)
    openai_compat_server.script.hang_s = 1.0
    backend = _backend(openai_compat_server.base_url, timeout_s=0.3, max_retries=1)
    with pytest.raises(error, match="after 2 attempts"):
        await backend.complete(_request())
    await backend.aclose()
    assert len(openai_compat_server.stats.requests) == 2


@pytest.mark.parametrize(("fault", "error"), [("400", ConfigurationError), ("context", BadInput)])
async def test_no_retry_on_client_errors(
    openai_compat_server: FakeOpenAIServer, fault: str, error: type[Exception]
) -> None:
    openai_compat_server.script.faults = deque([fault] * 3)
    backend = _backend(openai_compat_server.base_url)
    with pytest.raises(error):
        await backend.complete(_request())
    await backend.aclose()
    assert len(openai_compat_server.stats.requests) == 1


async def test_concurrency_limit_never_exceeded(openai_compat_server: FakeOpenAIServer) -> None:
    openai_compat_server.latency_s = 0.02
    backend = _backend(openai_compat_server.base_url, max_concurrency=4)
    await asyncio.gather(*(backend.complete(_request(f"c{i}")) for i in range(60)))
    await backend.aclose()
    assert openai_compat_server.stats.answered == 60
    assert openai_compat_server.stats.max_in_flight == 4


async def test_backend_down() -> None:
    backend = _backend(f"http://127.0.0.1:{free_port()}/v1", max_retries=1)
    with pytest.raises(BackendUnavailable, match="unreachable"):
        await backend.complete(_request())
    await backend.aclose()


@pytest.mark.slow
async def test_thousands_queued_calls_flow(openai_compat_server: FakeOpenAIServer) -> None:
    # The pool-collapse check: every call is queued at once; the semaphore in front of the
    # client keeps the pool at the limit, the first answers come back at once, none fail.
    openai_compat_server.latency_s = 0.01
    openai_compat_server.record_bodies = False
    backend = _backend(openai_compat_server.base_url, max_concurrency=64)
    request = _request()
    answered_at_first: list[int] = []

    async def one() -> None:
        await backend.complete(request)
        if not answered_at_first:
            answered_at_first.append(openai_compat_server.stats.answered)

    await asyncio.gather(*(one() for _ in range(3000)))
    await backend.aclose()
    assert openai_compat_server.stats.answered == 3000
    assert openai_compat_server.stats.max_in_flight <= 64
    # Counted, not timed (a wall-clock bound failed on a loaded machine): the first caller
    # has its answer while the server has answered about one round of 64, not the ~3000 of
    # a pool that held every answer back until the queue drained.
    assert answered_at_first[0] <= 3000 // 4, answered_at_first


# Each server's own wording of a prompt that does not fit, and of a content filter's refusal
# (as their sources and documented error bodies word them): the item's error, never the
# deployment's configuration error (before, every one but vLLM's and OpenAI's context error
# was a configuration_error).
ITEM_ERRORS = [
    (
        "SGLang",
        400,
        {
            "object": "error",
            "message": (
                "The input (9000 tokens) is longer than the model's context length (8192 tokens)."
            ),
            "type": "BadRequestError",
            "code": 400,
        },
        BadInput,
    ),
    (
        "SGLang",
        400,
        {
            "object": "error",
            "message": (
                "Requested token count exceeds the model's maximum"
                " context length of 8192 tokens. You requested a total"
                " of 9100 tokens."
            ),
            "code": 400,
        },
        BadInput,
    ),
    (
        "TGI",
        422,
        {
            "error": (
                "Input validation error: `inputs` tokens +"
                " `max_new_tokens` must be <= 4096. Given: 4000"
                " `inputs` tokens and 512 `max_new_tokens`"
            ),
            "error_type": "validation",
        },
        BadInput,
    ),
    (
        "TGI",
        422,
        {
            "error": (
                "Input validation error: `inputs` must have less than 4095 tokens. Given: 5000"
            ),
            "error_type": "validation",
        },
        BadInput,
    ),
    (
        "llama.cpp",
        400,
        {
            "error": {
                "code": 400,
                "message": (
                    "request (4476 tokens) exceeds the available context"
                    " size (4096 tokens), try increasing it"
                ),
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4476,
                "n_ctx": 4096,
            }
        },
        BadInput,
    ),
    (
        "llama.cpp (older)",
        400,
        {
            "error": {
                "code": 400,
                "message": ("the request exceeds the available context size, try increasing it"),
                "type": "invalid_request_error",
            }
        },
        BadInput,
    ),
    (
        "OpenAI",
        400,
        {
            "error": {
                "message": (
                    "This model's maximum context length is 128000 tokens."
                    " However, your messages resulted in 130000 tokens."
                ),
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        BadInput,
    ),
    (
        "Anthropic-compatible",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 208310 tokens > 200000 maximum",
            },
        },
        BadInput,
    ),
    (
        "Azure OpenAI",
        400,
        {
            "error": {
                "message": (
                    "The response was filtered due to the prompt triggering"
                    " Azure OpenAI's content management policy. Please"
                    " modify your prompt and retry."
                ),
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
                "innererror": {"code": "ResponsibleAIPolicyViolation"},
            }
        },
        Refusal,
    ),
    (
        "OpenAI",
        400,
        {
            "error": {
                "message": (
                    "Invalid prompt: your prompt was flagged as potentially"
                    " violating our usage policy. Please try again with a"
                    " different prompt."
                ),
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_prompt",
            }
        },
        Refusal,
    ),
    (
        "OpenAI",
        400,
        {
            "error": {
                "message": "Your request was rejected as a result of our safety system.",
                "type": "invalid_request_error",
                "code": "content_policy_violation",
            }
        },
        Refusal,
    ),
]


@pytest.mark.parametrize(
    ("server", "status", "body", "error"),
    ITEM_ERRORS,
    ids=lambda v: v if isinstance(v, str) else "",
)
async def test_each_servers_context_and_content_filter_wording_is_the_items_error(
    openai_compat_server: FakeOpenAIServer,
    server: str,
    status: int,
    body: Any,
    error: type[Exception],
) -> None:
    openai_compat_server.script.errors = deque([(status, body)])
    backend = _backend(openai_compat_server.base_url)
    with pytest.raises(error):
        await backend.complete(_request())
    await backend.aclose()
    assert len(openai_compat_server.stats.requests) == 1  # not retried
