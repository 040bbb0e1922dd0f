"""A scripted OpenAI-compatible server: fixed latency, a concurrency cap, records.

It answers ``POST /v1/chat/completions`` the way vLLM answers a verdict call under guided
decoding: it reads the verdict keys from the request's JSON schema (or, without one, from
criteria in the last user message written as a line ``[KEY] ...`` followed by the
criterion's text), picks a level 0, 1 or 2 per key from a :class:`FakeScript` (rules match
the criterion's text), and returns ``{KEY: {"reason": ..., "verdict": level}}`` with
per-token log-probabilities where the verdict digit is its own token. It records every request body,
the most requests it ever held at once and when it answered first, and can inject faults
(429, 500, 400, timeouts, unreadable answers, refusals) for the next requests.

Use it in-process (``FakeOpenAIServer(...).start()`` runs it in a thread with its own event
loop; tests) or as a process for benchmarks::

    python -m tribunal.llm.testing.fake_openai --port 8911 --latency-ms 200 --cap 128

``GET /stats`` returns the counters; ``POST /reset`` clears them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import heapq
import json
import math
import re
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

_CRITERION = re.compile(r"^\[(\w+)\] [^\n]*\n(.*?)(?=\n\[\w+\] |\n\n|\Z)", re.MULTILINE | re.DOTALL)
FAULTS = ("429", "500", "400", "context", "timeout", "garbage", "bad_verdict", "refusal")
"""Faults :attr:`FakeScript.faults` can hold, each applied to one request."""


@dataclass
class FakeScript:
    """How the fake server answers.

    Attributes:
        default_level: Level for criteria no rule matches (0, 1 or 2).
        rules: (substring, level): the first rule whose substring occurs in a criterion wins.
        hash_levels: Instead of ``default_level``, derive a level from a hash of the criterion
            (deterministic, mixed verdicts for real data).
        probs: Level -> distribution over levels reported in the verdict token's
            ``top_logprobs`` (default: the chosen level with probability ~1).
        faults: Applied in order, one per request, before answering normally.
        hang_s: How long a ``timeout`` fault holds the request.
        reason: The reason written for every verdict.
        replies: Raw choices, one per request (after ``faults``), answered instead of the
            scripted verdicts: ``{"content": ..., "finish_reason": ..., "logprobs": ...}``,
            each key optional (content defaults to '', finish_reason to ``stop``), any JSON
            value allowed, so that tests can send what a hostile or broken server would.
            ``$K1``, ``$K2`` ... in its strings stand for the request's verdict keys (drawn
            per call), so that a reply can be the judge's own answer.
        errors: (HTTP status, JSON body), one per request (after ``faults``), answered
            instead of a completion: a server's own error, worded as that server words it.
    """

    default_level: int = 2
    rules: list[tuple[str, int]] = field(default_factory=list)
    hash_levels: bool = False
    probs: dict[int, dict[int, float]] = field(default_factory=dict)
    faults: deque[str] = field(default_factory=deque)
    hang_s: float = 2.0
    reason: str = "Scripted verdict."
    replies: deque[dict[str, Any]] = field(default_factory=deque)
    errors: deque[tuple[int, Any]] = field(default_factory=deque)

    def level_for(self, criterion: str) -> int:
        """Return the level this script gives a criterion."""
        for needle, level in self.rules:
            if needle in criterion:
                return level
        if self.hash_levels:
            return hashlib.sha256(criterion.encode()).digest()[0] % 3
        return self.default_level


@dataclass
class FakeStats:
    """What the server saw (read them from the test thread; CPython makes this safe)."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    answered: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    started_at: float = field(default_factory=time.monotonic)
    first_answer_at: float | None = None
    last_answer_at: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready counters (without the request bodies)."""
        return {
            "received": len(self.requests),
            "answered": self.answered,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "first_answer_s": None
            if self.first_answer_at is None
            else self.first_answer_at - self.started_at,
            "last_answer_s": None
            if self.last_answer_at is None
            else self.last_answer_at - self.started_at,
        }


class FakeOpenAIServer:
    """The server. ``latency_s`` per answer; at most ``cap`` answered at once (others queue).

    Args:
        script: Verdicts and faults.
        latency_s: Time each request holds its slot, building the answer included, seconds.
        cap: Requests processed concurrently (like vLLM's ``--max-num-seqs``).
        record_bodies: Keep every request body in ``stats.requests`` (off for benchmarks).
        tokenizer_info: What ``GET /tokenizer_info`` answers (vLLM's, with
            ``--enable-tokenizer-info-endpoint``: the served tokenizer's config), or None for
            a 404 (a server without it).
    """

    def __init__(
        self,
        script: FakeScript | None = None,
        latency_s: float = 0.0,
        cap: int = 1024,
        record_bodies: bool = True,
        tokenizer_info: dict[str, Any] | None = None,
    ) -> None:
        self.script = script or FakeScript()
        self.tokenizer_info = tokenizer_info
        self.latency_s = latency_s
        self.cap = cap
        self.record_bodies = record_bodies
        self.stats = FakeStats()
        self.base_url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._free_at: list[float] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def app(self) -> web.Application:
        """Return the aiohttp application."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/tokenizer_info", self._tokenizer_info)
        app.router.add_get("/stats", self._stats)
        app.router.add_post("/reset", self._reset)
        return app

    async def start_async(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Start on the running loop; return the base URL (``http://host:port/v1``)."""
        self._semaphore = asyncio.Semaphore(self.cap)
        self._free_at = [0.0] * self.cap  # when each slot frees (a heap; all free now)
        self._runner = web.AppRunner(self.app(), handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, backlog=4096)
        await site.start()
        server = site._server
        assert server is not None
        bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.base_url = f"http://{host}:{bound}/v1"
        return self.base_url

    async def stop_async(self) -> None:
        """Stop serving (pending handlers are cancelled)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Run the server in a daemon thread with its own loop; return the base URL.

        Args:
            host: Address to bind.
            port: Port to bind (0: a free one), e.g. where a service already expects it.
        """
        ready = threading.Event()
        box: dict[str, Any] = {}

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                box["url"] = loop.run_until_complete(self.start_async(host, port))
            except BaseException as exc:  # report start failures to the caller
                box["error"] = exc
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop_async())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        self._thread.start()
        ready.wait(10)
        if "error" in box:
            raise box["error"]
        return str(box["url"])

    def stop(self) -> None:
        """Stop the thread started by :meth:`start`."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None
            self._thread = None

    def reset(self) -> None:
        """Clear the counters and recorded requests."""
        self.stats = FakeStats()

    # -- handlers ----------------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake-llm"}]})

    async def _tokenizer_info(self, request: web.Request) -> web.Response:
        if self.tokenizer_info is None:
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.json_response(self.tokenizer_info)

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats.as_dict())

    async def _reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    async def _chat(self, request: web.Request) -> web.Response:
        stats = self.stats
        arrived = time.monotonic()
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            body = await request.json()
            stats.requests.append(body if self.record_bodies else {})
            fault = self.script.faults.popleft() if self.script.faults else None
            assert self._semaphore is not None
            async with self._semaphore:
                hold_s = self.script.hang_s if fault == "timeout" else self.latency_s
                deadline = self._occupy_slot(arrived, hold_s)
                response = self._answer(body, fault)
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    await asyncio.sleep(remaining)
            now = time.monotonic()
            if stats.first_answer_at is None:
                stats.first_answer_at = now
            stats.last_answer_at = now
            stats.answered += 1
            return response
        finally:
            stats.in_flight -= 1

    def _occupy_slot(self, arrived: float, hold_s: float) -> float:
        """Take the slot that freed first for ``hold_s``; return when the answer is due.

        A call starts when its slot freed (or when it arrived, if later), not when this
        event loop got round to admitting it, and building the answer counts against its
        latency: the server's own scheduling lag and CPU time do not accumulate, so with
        calls queued it answers exactly ``cap / latency_s`` calls/s, and whatever a client
        measures below that is the client's.
        """
        start = max(heapq.heappop(self._free_at), arrived)
        heapq.heappush(self._free_at, start + hold_s)
        return start + hold_s

    def _answer(self, body: dict[str, Any], fault: str | None) -> web.Response:
        if fault == "429":
            return web.json_response({"error": "busy"}, status=429, headers={"Retry-After": "0"})
        if fault == "500":
            return web.json_response({"error": "engine died"}, status=500)
        if fault == "400":
            return web.json_response({"error": {"message": "unknown parameter"}}, status=400)
        if fault == "context":
            too_long = "This model's maximum context length is 4096 tokens"
            return web.json_response({"error": {"message": too_long}}, status=400)
        if self.script.errors:
            status, error = self.script.errors.popleft()
            return web.json_response(error, status=status)
        if self.script.replies:
            return self._raw_reply(body, self.script.replies.popleft())
        user = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        criteria = dict(_CRITERION.findall(user))
        keys = _schema_keys(body) or list(criteria)
        levels = {key: self.script.level_for(criteria.get(key, "")) for key in keys}
        pieces = _content_pieces(keys, levels, self.script.reason, fault)
        content = "".join(text for text, _ in pieces)
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        finish = "stop"
        if fault == "refusal":
            message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        if body.get("logprobs") and fault != "refusal":
            choice["logprobs"] = {"content": [self._token(t, lvl) for t, lvl in pieces]}
        prompt_chars = sum(len(m["content"]) for m in body["messages"])
        return web.json_response(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [choice],
                "usage": {
                    "prompt_tokens": prompt_chars // 4,
                    "completion_tokens": len(pieces),
                    "total_tokens": prompt_chars // 4 + len(pieces),
                },
            }
        )

    def _raw_reply(self, body: dict[str, Any], reply: dict[str, Any]) -> web.Response:
        user = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
        reply = _fill_keys(reply, _schema_keys(body) or [k for k, _ in _CRITERION.findall(user)])
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": reply.get("content", ""), "refusal": None},
            "finish_reason": reply.get("finish_reason", "stop"),
        }
        if "logprobs" in reply:
            choice["logprobs"] = reply["logprobs"]
        return web.json_response(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [choice],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    def _token(self, text: str, level: int | None) -> dict[str, Any]:
        if level is None:
            return {
                "token": text,
                "logprob": 0.0,
                "top_logprobs": [{"token": text, "logprob": 0.0}],
            }
        dist = self.script.probs.get(level) or {level: 1.0}
        top = []
        for alt in (0, 1, 2):
            p = dist.get(alt, 0.0)
            top.append({"token": str(alt), "logprob": math.log(p) if p > 0 else -1000.0})
        top.sort(key=lambda t: -float(t["logprob"]))  # type: ignore[arg-type]
        own = next(t["logprob"] for t in top if t["token"] == text)
        return {"token": text, "logprob": own, "top_logprobs": top}


def _fill_keys(value: Any, keys: list[str]) -> Any:
    """``value`` with ``$K<i>`` in every string replaced by the i-th verdict key (last first,
    so that ``$K1`` never eats the start of ``$K10``)."""
    if isinstance(value, str):
        for i in range(len(keys), 0, -1):
            value = value.replace(f"$K{i}", keys[i - 1])
        return value
    if isinstance(value, dict):
        return {k: _fill_keys(v, keys) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_keys(v, keys) for v in value]
    return value


def _schema_keys(body: dict[str, Any]) -> list[str]:
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {}
    return list((schema.get("properties") or {}).keys())


def _content_pieces(
    keys: list[str], levels: dict[str, int], reason: str, fault: str | None
) -> list[tuple[str, int | None]]:
    """The answer as tokens: (text, level if this token is a verdict digit)."""
    if fault == "garbage":
        return [("The response", None), (" looks fine to me.", None)]
    pieces: list[tuple[str, int | None]] = [("{", None)]
    for n, key in enumerate(keys):
        if n:
            pieces.append((", ", None))
        pieces.append((f'"{key}": {{"reason": {json.dumps(reason)}, "verdict": ', None))
        if fault == "bad_verdict":
            pieces.append(("7", None))
        else:
            pieces.append((str(levels[key]), levels[key]))
        pieces.append(("}", None))
    pieces.append(("}", None))
    return pieces


def main(argv: list[str] | None = None) -> None:
    """Run the fake server as a process until interrupted (for benchmarks)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--cap", type=int, default=128)
    args = parser.parse_args(argv)
    server = FakeOpenAIServer(latency_s=args.latency_ms / 1000, cap=args.cap, record_bodies=False)

    async def serve() -> None:
        url = await server.start_async(args.host, args.port)
        sys.stdout.write(f"listening {url}\n")
        sys.stdout.flush()
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
