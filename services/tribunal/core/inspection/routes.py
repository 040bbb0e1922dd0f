"""``/inspect``: the reward inspector's page, its JSON and its JSONL export.

The page is one static HTML file and one script of ours (``static/``) that build the DOM
with ``textContent`` only, so that what a policy or a program wrote (responses, claims,
stdout, judge reasons, even ids) is shown as text, never parsed as HTML; uPlot (vendored,
MIT) draws the charts. Everything is served by the service itself (no CDN) and sits behind
the API key like ``/v1`` (``BodyLimitMiddleware``: a bearer token, or the key as the
password of HTTP Basic authentication, which a browser asks for). The routes are left out of
the OpenAPI document: they are a page, not part of the scoring contract.
"""

from __future__ import annotations

import functools
import statistics
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from tribunal.core.deps import AppRuntime, RuntimeDep
from tribunal.core.inspection.store import dump_json, rid_order
from tribunal.core.verifier import DescribesSpecs, ReportsAudits
from tribunal.wire.errors import BadInput

STATIC = {
    "inspect.js": "text/javascript",
    "inspect.css": "text/css",
    "uPlot.iife.min.js": "text/javascript",
    "uPlot.min.css": "text/css",
}
"""The files under ``static/`` the page loads, and their media types."""

LIST_LIMIT = 500
"""Most summaries one list answer carries (the filters narrow the rest)."""

BINS = 20
"""Bars of a reward histogram, and points of a mean-over-time series."""


@dataclass(frozen=True)
class Filters:
    """What a view is narrowed to; every field optional (None: no condition).

    ``verifier`` matches the stream's verifier or the one that scored the item (``math``,
    ``spec:rloo_math``); ``error`` is an error class, ``any`` (every failed item) or ``none``
    (every item with a reward); ``key`` is resolved to its job at query time.
    """

    verifier: str | None = None
    spec: str | None = None
    min_reward: float | None = None
    max_reward: float | None = None
    error: str | None = None
    group: str | None = None
    job: str | None = None
    item: str | None = None

    def match(self, s: dict[str, Any]) -> bool:
        """Whether summary ``s`` passes every condition."""
        reward = s.get("reward")
        checks = (
            self.verifier is None or self.verifier in (s.get("verifier"), s.get("scorer")),
            self.spec is None or s.get("spec") == self.spec,
            self.min_reward is None or (reward is not None and reward >= self.min_reward),
            self.max_reward is None or (reward is not None and reward <= self.max_reward),
            self._error_matches(s.get("error")),
            self.group is None or s.get("group") == self.group,
            self.job is None or s.get("job") == self.job,
            self.item is None or s.get("id") == self.item,
        )
        return all(checks)

    def _error_matches(self, code: str | None) -> bool:
        if self.error is None:
            return True
        if self.error == "any":
            return code is not None
        if self.error == "none":
            return code is None
        return code == self.error


def _text(value: str | None) -> str | None:
    return value.strip() or None if value is not None else None


async def _job_of_key(runtime: AppRuntime, key: str) -> str:
    """The job an idempotency key names on any of the app's verifiers ('' when none)."""
    for verifier in runtime.services:
        job = await runtime.queue.job_of_key(verifier, key)
        if job is not None:
            return job
    return ""


async def _filters(
    runtime: RuntimeDep,
    verifier: str | None = None,
    spec: str | None = None,
    min_reward: float | None = None,
    max_reward: float | None = None,
    error: str | None = None,
    group: str | None = None,
    key: str | None = None,
    job: str | None = None,
    item: str | None = None,
) -> Filters:
    """The view's filters from its query (a dependency of every view and the export)."""
    if min_reward is not None and max_reward is not None and min_reward > max_reward:
        raise BadInput("min_reward is above max_reward", field="min_reward")
    if key := _text(key):
        # A key that names no job matches nothing (not everything).
        job_of_key = await _job_of_key(runtime, key)
        if job and job != job_of_key:
            job_of_key = ""
        job = job_of_key or "-"
    return Filters(
        _text(verifier),
        _text(spec),
        min_reward,
        max_reward,
        _text(error),
        _text(group),
        _text(job),
        _text(item),
    )


FiltersDep = Annotated[Filters, Depends(_filters)]


async def _summaries(runtime: AppRuntime, filters: Filters) -> list[dict[str, Any]]:
    """Every kept summary of the app's verifiers that passes ``filters``, newest first."""
    found: list[dict[str, Any]] = []
    for verifier in runtime.services:
        found += [s for s in await runtime.inspect.summaries(verifier) if filters.match(s)]
    found.sort(key=_order, reverse=True)
    return found


def _order(summary: dict[str, Any]) -> tuple[int, int, int]:
    return rid_order(str(summary.get("rid", "")))


def _histogram(rewards: list[float]) -> dict[str, Any]:
    low, high = min(rewards), max(rewards)
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    width = (high - low) / BINS
    counts = [0] * BINS
    for reward in rewards:
        counts[min(BINS - 1, int((reward - low) / width))] += 1
    return {"edges": [low + i * width for i in range(BINS + 1)], "counts": counts}


def _over_time(points: list[tuple[float, float]]) -> dict[str, list[float | None]]:
    """Mean and spread (population standard deviation) of the rewards in ``BINS`` equal
    stretches of time, oldest first (None where a stretch holds no reward)."""
    start, end = points[0][0], points[-1][0]
    width = max((end - start) / BINS, 1e-6)
    buckets: list[list[float]] = [[] for _ in range(BINS)]
    for t, reward in points:
        buckets[min(BINS - 1, int((t - start) / width))].append(reward)
    series: dict[str, list[float | None]] = {"t": [], "mean": [], "std": []}
    for i, bucket in enumerate(buckets):
        series["t"].append(start + (i + 0.5) * width)
        series["mean"].append(statistics.fmean(bucket) if bucket else None)
        series["std"].append(statistics.pstdev(bucket) if bucket else None)
    return series


def _scorer_stats(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    rewards = [s["reward"] for s in summaries if isinstance(s.get("reward"), int | float)]
    errors = Counter(s["error"] for s in summaries if s.get("error"))
    rubrics: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s in summaries:
        for label, verdict in s.get("rubrics") or []:
            if verdict is not None:
                rubrics[label][0] += verdict in ("met", "present")
                rubrics[label][1] += 1
    stats: dict[str, Any] = {
        "items": len(summaries),
        "scored": len(rewards),
        "mean": statistics.fmean(rewards) if rewards else None,
        "std": statistics.pstdev(rewards) if rewards else None,
        "error_share": {code: n / len(summaries) for code, n in errors.most_common()},
        "rubric_met_share": {
            label: {"met": met, "judged": judged, "share": met / judged}
            for label, (met, judged) in sorted(rubrics.items())
        },
    }
    if rewards:
        stats["histogram"] = _histogram(rewards)
        timed = sorted(
            (s["t"], s["reward"])
            for s in summaries
            if isinstance(s.get("reward"), int | float) and isinstance(s.get("t"), int | float)
        )
        stats["over_time"] = _over_time(timed)
    return stats


def _groups(summaries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per GRPO group (newest first): its items' rewards side by side, whether they are all
    equal (no learning signal) and how many completions repeat another of the group."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in summaries:
        if s.get("group"):
            groups.setdefault((s["job"], s["group"]), []).append(s)
    answer = []
    for (job, group), members in groups.items():
        members.sort(key=lambda s: s.get("index", 0))
        rewards = [s.get("reward") for s in members]
        hashes = [s["response_hash"] for s in members if s.get("response_hash")]
        scored = [r for r in rewards if r is not None]
        answer.append(
            {
                "group": group,
                "job": job,
                "items": [
                    {
                        "id": s.get("id"),
                        "rid": s.get("rid"),
                        "verifier": s.get("verifier"),
                        "reward": s.get("reward"),
                        "error": s.get("error"),
                        "cached": bool(s.get("cached")),
                    }
                    for s in members
                ],
                "cache_hits": sum(bool(s.get("cached")) for s in members),
                "all_equal": len(scored) > 1 and max(scored) - min(scored) < 1e-12,
                "identical_completions": len(hashes) - len(set(hashes)),
                "std": statistics.pstdev(scored) if scored else None,
            }
        )
    return answer


router = APIRouter(prefix="/inspect", include_in_schema=False)


def inspect_router() -> APIRouter:
    """The inspector's routes (authorised by ``BodyLimitMiddleware`` like ``/v1``)."""
    return router


@functools.cache
def _static(name: str) -> bytes:
    return (resources.files(__package__) / "static" / name).read_bytes()


@router.get("")
async def inspect_page() -> HTMLResponse:
    """The page (the views are drawn by its script from the JSON routes below)."""
    return HTMLResponse(_static("inspect.html"), headers=_PAGE_HEADERS)


@router.get("/static/{name}")
async def static_file(name: str) -> Response:
    """One of the page's files (``STATIC``); any other name is 404."""
    media_type = STATIC.get(name)
    if media_type is None:
        raise HTTPException(404, f"no inspector file {name!r}")
    return Response(_static(name), media_type=media_type, headers={"Cache-Control": "max-age=3600"})


@router.get("/api/meta")
async def meta(runtime: RuntimeDep) -> Response:
    """The record's settings and how many items each verifier keeps now."""
    settings = runtime.settings
    body = {
        "verifiers": list(runtime.services),
        "recording": settings.inspect_sample_rate > 0,
        "sample_rate": settings.inspect_sample_rate,
        "max_items": settings.inspect_max_items,
        "ttl_s": settings.inspect_ttl_s,
        "kept": {v: await runtime.inspect.size(v) for v in runtime.services},
        "queue": runtime.queue.name,
    }
    return Response(dump_json(body), media_type="application/json")


@router.get("/api/items")
async def items(
    runtime: RuntimeDep,
    filters: FiltersDep,
    limit: Annotated[int, Query(ge=1, le=LIST_LIMIT)] = 200,
) -> Response:
    """The summaries that match, newest first: ``{"total", "items"}``."""
    found = await _summaries(runtime, filters)
    body = {"total": len(found), "items": found[:limit]}
    return Response(dump_json(body), media_type="application/json")


@router.get("/api/stats")
async def stats(runtime: RuntimeDep, filters: FiltersDep) -> Response:
    """Per spec or verifier: histogram, mean and spread over time, error share by class,
    per-rubric share met; and per GRPO group its rewards side by side."""
    found = await _summaries(runtime, filters)
    by_scorer: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in found:
        name = f"spec:{s['spec']}" if s.get("spec") else s.get("scorer") or s["verifier"]
        by_scorer[name].append(s)
    body = {
        "total": len(found),
        "scorers": {name: _scorer_stats(members) for name, members in sorted(by_scorer.items())},
        "groups": _groups(found),
    }
    return Response(dump_json(body), media_type="application/json")


@router.get("/api/items/{verifier}/{rid:path}")
async def detail(verifier: str, rid: str, runtime: RuntimeDep) -> Response:
    """One kept item whole: ``{"summary", "item", "result", "spec_rule", "same_id"}``.

    ``rid`` is a record's inspector id, or else an item's own id: then the newest record of
    that item, and ``same_id`` counts the records of that id kept (each a scoring of it; 1
    when ``rid`` named the record)."""
    if verifier not in runtime.services:
        raise HTTPException(404, f"no verifier {verifier!r} in this service")
    record = await runtime.inspect.record(verifier, rid)
    same_id = 1
    if record is None:
        # Not a record id: the item's own id, as a person has it (newest first).
        found = [s for s in await runtime.inspect.summaries(verifier) if s.get("id") == rid]
        same_id = len(found)
        record = await runtime.inspect.record(verifier, found[0]["rid"]) if found else None
    if record is None:
        raise HTTPException(
            404,
            f"no kept item of {verifier} has the inspector id or the item id {rid!r} (trimmed "
            "by TRIBUNAL_INSPECT_MAX_ITEMS, expired after TRIBUNAL_INSPECT_TTL_S, or never was)",
        )
    record["same_id"] = same_id
    spec = record["summary"].get("spec")
    scorer = runtime.services[verifier].verifier
    record["spec_rule"] = None
    if isinstance(scorer, DescribesSpecs) and spec:
        record["spec_rule"] = scorer.spec_rule(spec)
    return Response(dump_json(record), media_type="application/json")


@router.get("/api/audits")
async def audits(runtime: RuntimeDep) -> Response:
    """The monitor view's data: per audited spec of a service that audits (the gateway's
    ``audit_report``: training vs audit reward per window of steps, the gap's interval, the
    items driving it); ``{"specs": []}`` elsewhere."""
    specs: list[Any] = []
    for service in runtime.services.values():
        if isinstance(service.verifier, ReportsAudits):
            specs.extend(await service.verifier.audit_report(runtime.queue))
    return Response(dump_json({"specs": specs}), media_type="application/json")


@router.get("/api/signatures")
async def signatures(runtime: RuntimeDep) -> Response:
    """The monitor view's other data: per spec of a service that audits (the gateway's
    ``signature_report``, the body of its ``GET /v1/signatures``: the hack signatures' means
    and the model cost per window, the spend beside the budget); ``{"specs": []}`` elsewhere."""
    specs: list[Any] = []
    for service in runtime.services.values():
        if isinstance(service.verifier, ReportsAudits):
            specs.extend(await service.verifier.signature_report(runtime.queue))
    return Response(dump_json({"specs": specs}), media_type="application/json")


@router.get("/api/export.jsonl")
async def export(runtime: RuntimeDep, filters: FiltersDep) -> StreamingResponse:
    """The records that match, newest first, one JSON object a line (as the detail route)."""
    found = await _summaries(runtime, filters)

    async def lines() -> AsyncIterator[bytes]:
        for s in found:
            record = await runtime.inspect.record(s["verifier"], s["rid"])
            if record is not None:  # trimmed since the list was read
                yield dump_json(record) + b"\n"

    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="inspect.jsonl"'},
    )


_PAGE_HEADERS = {
    # Only the page's own files run: an injected <script> in kept text could not execute even
    # if it were ever parsed as HTML (the script builds the DOM as text; this is the backstop).
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
