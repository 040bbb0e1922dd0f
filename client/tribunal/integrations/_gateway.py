"""The adapters' one call: score a batch of items on the gateway, through ``tribunal.client``.

The trainers call the adapters from event loops and threads of their own: TRL awaits its
reward functions on a loop in a daemon thread, verl ≥ 0.9 on its reward workers' loops, older
verl from threads without a loop. A ``TribunalClient`` (an httpx pool and a semaphore) is
bound to the loop it first runs on, so one is kept **per event loop** (and per gateway URL,
key, timeout and retries) and reused by every call on that loop: a client and a connection
per call cost some 10 ms plus a TCP handshake per batch (docs/benchmarks.md, issue 20).

A loop's clients are closed when the loop shuts down its async generators, as
``asyncio.run``, ``asyncio.Runner`` and pytest-asyncio do before closing it; what is left at
interpreter exit (TRL's daemon loop, which it stops and never closes) is closed then. The
synchronous twins run on an event loop of their own thread (:func:`run_sync`), kept between
calls, so they reuse a client too. Nothing here is pickled: a reward function holds only its
settings and finds its loop's client when called, so a copy unpickled in another process
builds its own. A forked child drops what it inherited (its parent's sockets are not its to
use) and builds its own clients.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
from collections.abc import AsyncIterator, Coroutine, Sequence
from typing import Any, TypeVar

from tribunal.client import ItemResult, TribunalClient
from tribunal.wire.ports import env_port, local_url


def gateway_access(url: str | None, api_key: str | None) -> tuple[str, str | None]:
    """The gateway's URL and bearer token: those given, else ``TRIBUNAL_GATEWAY_URL`` (default
    the gateway of ``make up``, ``http://127.0.0.1`` on ``TRIBUNAL_GATEWAY_PORT`` when set,
    else 8100) and ``TRIBUNAL_API_KEY``.

    The adapters run inside another project's trainer, configured by that project's config
    files: these two variables are the only way to point them elsewhere without code.
    """
    return (
        url or os.environ.get("TRIBUNAL_GATEWAY_URL") or local_url("gateway", env_port("gateway")),
        api_key or os.environ.get("TRIBUNAL_API_KEY") or None,
    )


logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_IN_FLIGHT = 64
"""Requests in flight at once per event loop and gateway (the client's semaphore and
connection pool); more wait in the client. verl's reward loop scores the samples of a worker
concurrently, one request each, as OpenRLHF does (64 in docs/benchmarks.md)."""

_CLOSE_AT_EXIT_S = 5.0
"""How long interpreter exit waits for the clients of a loop running in another thread."""

_ClientKey = tuple[str, str | None, float, int]


class _LoopClients:
    """The clients of one event loop and the async generator that closes them with it."""

    def __init__(self) -> None:
        self.clients: dict[_ClientKey, TribunalClient] = {}
        self.closer: Any = None  # the started _close_with_loop generator


_lock = threading.Lock()
_by_loop: dict[asyncio.AbstractEventLoop, _LoopClients] = {}
_thread_loops: dict[asyncio.AbstractEventLoop, threading.Thread] = {}
"""The loops :func:`run_sync` made, with their threads (closed once the thread has ended)."""
_local = threading.local()
_inherited: list[Any] = []
"""What a forked child inherited: kept, never used, so that no finaliser of the parent's
sockets warns or runs in the child."""


async def _close_with_loop(
    loop: asyncio.AbstractEventLoop, pool: _LoopClients
) -> AsyncIterator[None]:
    """Started once per loop and never resumed: the loop's ``shutdown_asyncgens`` (or exit)
    closes it, and its ``finally`` closes the loop's clients while the loop still runs."""
    try:
        yield
    finally:
        with _lock:
            if _by_loop.get(loop) is pool:
                del _by_loop[loop]
        clients = list(pool.clients.values())
        pool.clients.clear()
        await asyncio.gather(*(client.aclose() for client in clients))


async def gateway_client(
    url: str, api_key: str | None, timeout_s: float, max_retries: int
) -> TribunalClient:
    """The running loop's client of the gateway at ``url``, built on first use.

    Raises:
        RuntimeError: No event loop is running in this thread.
    """
    loop = asyncio.get_running_loop()
    with _lock:
        pool = _by_loop.get(loop)
        fresh = pool is None
        if pool is None:
            pool = _by_loop[loop] = _LoopClients()
    if fresh:
        closer = _close_with_loop(loop, pool)
        # The first step runs to the `yield` without suspending, and registers the generator
        # with the loop (its firstiter hook), so that shutdown_asyncgens closes it.
        await closer.__anext__()
        pool.closer = closer
    key = (url, api_key, timeout_s, max_retries)
    client = pool.clients.get(key)
    if client is None:
        client = pool.clients[key] = TribunalClient(
            url,
            api_key=api_key,
            timeout=timeout_s,
            max_retries=max_retries,
            max_concurrency=MAX_IN_FLIGHT,
        )
    return client


async def score_on_gateway(
    url: str,
    items: Sequence[dict[str, Any]],
    api_key: str | None,
    timeout_s: float,
    max_retries: int = 6,
    step: int | None = None,
) -> list[ItemResult]:
    """``POST <url>/v1/gateway/score`` with ``items``; one result per item, in order, on the
    running loop's client (:func:`gateway_client`). ``step``: the trainer's step of the
    batch, sent in its envelope (None: the gateway windows it by time).

    Raises:
        tribunal.client.ClientError: The gateway cannot be reached or refused the batch
            (after the client's retries).
    """
    client = await gateway_client(url, api_key, timeout_s, max_retries)
    return await client.score("gateway", items, step=step)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on this thread's own event loop, kept between calls (so
    that its gateway clients are), for callers without a loop (verl's legacy managers call
    from threads). Loops of threads that have ended are closed here first, with their
    clients.

    Raises:
        RuntimeError: An event loop is already running in this thread (await the async
            function instead).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError("called from a running event loop: await the async function instead")
    _close_ended_threads_loops()
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = _local.loop = asyncio.new_event_loop()
        with _lock:
            _thread_loops[loop] = threading.current_thread()
    return loop.run_until_complete(coro)


def _close_own_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close a loop :func:`run_sync` made (not running), its clients first."""
    try:
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


def _close_ended_threads_loops() -> None:
    with _lock:
        ended = [loop for loop, thread in _thread_loops.items() if not thread.is_alive()]
        for loop in ended:
            del _thread_loops[loop]
    for loop in ended:
        _close_own_loop(loop)


@atexit.register
def _close_at_exit() -> None:
    """Close every client still open: those of :func:`run_sync`'s loops, and of loops that
    were never shut down (TRL stops its daemon loop at exit and does not close it)."""
    with _lock:
        own = list(_thread_loops)
        _thread_loops.clear()
        pools = list(_by_loop.items())
    for loop in own:
        if not loop.is_running() and not loop.is_closed():
            _close_own_loop(loop)
    for loop, pool in pools:
        if loop.is_closed() or pool.closer is None or loop in own:
            continue
        try:
            if loop.is_running():
                closing = asyncio.run_coroutine_threadsafe(pool.closer.aclose(), loop)
                closing.result(timeout=_CLOSE_AT_EXIT_S)
            else:
                loop.run_until_complete(pool.closer.aclose())
        except Exception as exc:  # exit goes on: the process is ending anyway
            logger.warning("closing the gateway clients of %r at exit failed: %r", loop, exc)


def _forget_in_child() -> None:
    global _local, _lock
    # A new lock: the parent's may have been held by a thread that the child does not have.
    _lock = threading.Lock()
    _inherited.extend([dict(_by_loop), dict(_thread_loops), _local])
    _by_loop.clear()
    _thread_loops.clear()
    _local = threading.local()


os.register_at_fork(after_in_child=_forget_in_child)
