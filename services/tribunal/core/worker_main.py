"""The worker process: start a service's verifiers and run their queue workers."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Sequence

from tribunal.core.inspection.store import build_inspect_store, recorder_for
from tribunal.core.queue.factory import build_cache, redis_queue
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.core.service import ServiceSpec, settle_heap
from tribunal.core.settings import CoreSettings
from tribunal.core.verifier import AttachesQueue, Verifier
from tribunal.core.worker import WorkerRuntime
from tribunal.wire.errors import ConfigurationError, QueueUnavailable

logger = logging.getLogger(__name__)


async def run_workers(spec: ServiceSpec, settings: CoreSettings) -> None:
    """Run until SIGTERM/SIGINT: batches in progress finish, then verifiers are closed.

    Workers need Redis (the embedded queue lives inside an API process). If Redis is down
    at start, they wait for it rather than exit, so a stack can start in any order.

    Raises:
        ConfigurationError: A verifier refuses to start (e.g. the code sandbox cannot isolate),
            or Redis's ``maxmemory-policy`` could evict the queue's keys.
    """
    if settings.queue == "memory":
        raise ConfigurationError(
            "TRIBUNAL_QUEUE=memory: workers of the embedded queue run inside the API process "
            "(tribunal api); a separate worker needs Redis"
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    queue = redis_queue(settings)
    # A Redis that may evict queue keys is refused here too (a Redis down now is waited for).
    try:
        await queue.check_memory_policy()
    except ConfigurationError:
        await queue.aclose()
        raise
    except QueueUnavailable as exc:
        logger.warning("Redis's eviction policy not checked (%s); waiting for Redis", exc.message)
    verifiers = spec.create_verifiers(settings)
    started = []
    try:
        try:
            for verifier in verifiers:
                await verifier.start()
                started.append(verifier)
                # A verifier that audits what it scores (the gateway) keeps its audits
                # beside this queue; one with rate limits (the judge) counts them there.
                if isinstance(verifier, AttachesQueue):
                    verifier.attach_queue(queue, settings.sync_timeout_s)
        except ConfigurationError as exc:
            # Every verifier of the service is down with this process: say why in the queue,
            # where the API's /readyz and submissions find it (if the queue answers).
            await _set_refusals(queue, verifiers, exc.message)
            raise
        # A refusal left by an earlier worker no longer holds. Redis may still be down here
        # (workers wait for it): a stale refusal is only reported while no worker is live.
        await _set_refusals(queue, verifiers, None)
        settle_heap()
        inspect = build_inspect_store(settings, queue)
        runtimes = [
            WorkerRuntime(
                verifier,
                queue,
                build_cache(settings, queue, verifier.name),
                batch_size=settings.worker_batch_size,
                concurrency=settings.worker_concurrency,
                max_deliveries=settings.max_deliveries,
                heartbeat_s=settings.worker_heartbeat_s,
                grace_s=settings.worker_grace_s,
                recorder=recorder_for(settings, inspect, verifier.name, queue.incr_stats),
            )
            for verifier in verifiers
        ]
        await asyncio.gather(*(runtime.run(stop) for runtime in runtimes))
    finally:
        for verifier in started:
            await verifier.aclose()
        await queue.aclose()
        logger.info("worker stopped")


async def _set_refusals(
    queue: RedisStreamsQueue, verifiers: Sequence[Verifier], reason: str | None
) -> None:
    """Record (or, with None, clear) the verifiers' refusal to start; a queue that does not
    answer is logged, never raised (the workers wait for Redis)."""
    try:
        for verifier in verifiers:
            await queue.set_refusal(verifier.name, reason)
    except QueueUnavailable as exc:
        what = "recorded" if reason is not None else "cleared"
        logger.warning("the workers' refusal not %s in the queue: %s", what, exc.message)
