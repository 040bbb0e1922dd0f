"""The reward inspector's record and routes: cap, TTL, sampling, off, filters, export, auth.

The record is exercised on a real Redis (the layout the workers write) and on the embedded
queue's store, through the app (``httpx.ASGITransport``) with the toy verifier scoring for
real. The page itself is driven in a real browser by ``tests/e2e/test_inspect_browser.py``.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as aioredis

from tests.conftest import RedisServer
from tests.core.test_app import client_for
from tests.core.toy import ToyVerifier, toy_spec
from tribunal.core.app import create_app
from tribunal.core.inspection.store import (
    InspectRecorder,
    InspectStore,
    MemoryInspectStore,
    RedisInspectStore,
    keep,
    sampled,
)
from tribunal.core.queue.base import Delivery
from tribunal.core.queue.keys import Keys
from tribunal.core.settings import CoreSettings


def _delivery(index: int, group: str | None = None, job: str = "j" * 32) -> Delivery:
    payload = {"id": f"i{index}", "group_id": group, "response": f"answer {index}"}
    return Delivery(f"{1_700_000_000_000 + index}-0", job, index, payload, None, 1)


def _result(index: int, reward: float | None = 1.0, error: str | None = None) -> str:
    body: dict[str, Any] = {
        "id": f"i{index}",
        "reward": reward,
        "error": None
        if error is None
        else {"code": error, "message": "m", "retryable": False, "field": None},
        "details": {},
        "verifier": {"name": "toy", "version": "1", "config_hash": "0" * 16},
        "cached": False,
    }
    return orjson.dumps(body).decode()


@pytest.fixture
async def redis_client(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    yield client
    await client.aclose()


StoreFactory = Callable[[int, int], InspectStore]


@pytest.fixture(params=["redis", "memory"])
def make_store(
    request: pytest.FixtureRequest, redis_client: aioredis.Redis, key_prefix: str
) -> StoreFactory:
    if request.param == "memory":
        return MemoryInspectStore
    return lambda cap, ttl: RedisInspectStore(redis_client, Keys(key_prefix), cap, ttl)


async def test_the_cap_keeps_the_newest_items_and_drops_the_rest_whole(
    make_store: StoreFactory, redis_client: aioredis.Redis, key_prefix: str
) -> None:
    store = make_store(5, 3600)
    for start in range(0, 12, 4):  # three writes, 12 items, cap 5
        kept = [keep(_delivery(i), _result(i), "toy") for i in range(start, start + 4)]
        await store.add("toy", kept)
    ids = [s["id"] for s in await store.summaries("toy")]
    # The newest items, at most the cap; Redis drops the oldest batches whole (here the one
    # of i4-i7), the embedded store item by item.
    expected = ["i11", "i10", "i9", "i8"] if isinstance(store, RedisInspectStore) else None
    assert ids == (expected or ["i11", "i10", "i9", "i8", "i7"])
    assert await store.size("toy") == len(ids)
    newest = (await store.summaries("toy"))[0]["rid"]
    assert (await store.record("toy", newest))["item"]["response"] == "answer 11"
    if isinstance(store, RedisInspectStore):
        keys = {k async for k in redis_client.scan_iter(f"{key_prefix}:inspect:*")}
        stream = f"{key_prefix}:inspect:toy"
        assert keys == {stream, f"{stream}:n", f"{stream}:sizes"}
        assert await redis_client.xlen(stream) == 1  # one batch left
        assert await redis_client.llen(f"{stream}:sizes") == 1


async def test_a_batch_larger_than_the_cap_keeps_its_newest(make_store: StoreFactory) -> None:
    store = make_store(3, 3600)
    await store.add("toy", [keep(_delivery(i), _result(i), "toy") for i in range(10)])
    assert [s["id"] for s in await store.summaries("toy")] == ["i9", "i8", "i7"]
    assert await store.size("toy") == 3


async def test_the_ttl_drops_old_items(
    make_store: StoreFactory, redis_client: aioredis.Redis
) -> None:
    store = make_store(100, 1)
    await store.add("toy", [keep(_delivery(0), _result(0), "toy")])
    first = (await store.summaries("toy"))[0]["rid"]
    if isinstance(store, RedisInspectStore):
        assert 0 < await redis_client.pttl(store.keys.inspect("toy")) <= 1000
        assert 0 < await redis_client.pttl(store.keys.inspect_count("toy")) <= 1000
    await asyncio.sleep(1.1)  # past the TTL: waiting on it, not timing anything
    await store.add("toy", [keep(_delivery(1), _result(1), "toy")])
    assert [s["id"] for s in await store.summaries("toy")] == ["i1"]
    assert await store.record("toy", first) is None


async def test_an_unknown_or_malformed_id_is_not_found(make_store: StoreFactory) -> None:
    store = make_store(10, 60)
    for rid in ("1-0", "1-0.0", "*", "-.0", "1-0.x", "+"):
        assert await store.record("toy", rid) is None


def test_sampling_is_per_group_and_deterministic() -> None:
    keys = [f"job:g:{n}" for n in range(2000)]
    kept = [k for k in keys if sampled(k, 0.25)]
    assert 350 < len(kept) < 650  # a quarter of 2000, loosely
    assert kept == [k for k in keys if sampled(k, 0.25)]
    assert all(sampled(k, 1.0) for k in keys)


async def test_a_recorder_keeps_a_groups_items_together() -> None:
    store = MemoryInspectStore(10_000, 3600)
    recorder = InspectRecorder(store, "toy", 0.5)
    done = [(_delivery(i, group=f"g{i // 4}"), _result(i)) for i in range(400)]
    recorder.record(done)
    await recorder.aclose()
    groups: dict[str, int] = {}
    for summary in await store.summaries("toy"):
        groups[summary["group"]] = groups.get(summary["group"], 0) + 1
    assert 0 < len(groups) < 100
    assert set(groups.values()) == {4}  # every kept group is whole


async def _score(client: httpx.AsyncClient, items: list[dict[str, Any]], **body: Any) -> Any:
    answer = await client.post("/v1/jobs", json={"verifier": "toy", "items": items, **body})
    assert answer.status_code == 202, answer.text
    job = answer.json()["job_id"]
    state = (await client.get(f"/v1/jobs/{job}?wait=10")).json()
    assert state["status"] == "done"
    return job


async def _kept(client: httpx.AsyncClient, count: int, query: str = "") -> dict[str, Any]:
    # The recorder writes after the results: wait for it to catch up (by count, not time).
    for _ in range(200):
        listing: dict[str, Any] = (await client.get(f"/inspect/api/items?{query}")).json()
        if listing["total"] >= count:
            return listing
        await asyncio.sleep(0.02)
    raise AssertionError(f"the inspector kept {listing['total']} items, expected {count}")


@pytest.fixture
async def inspected() -> AsyncIterator[httpx.AsyncClient]:
    settings = CoreSettings(queue="memory", api_key="sk-inspect", cache_ttl_s=0)
    async for client in client_for(create_app(toy_spec(ToyVerifier()), settings)):
        client.headers["authorization"] = "Bearer sk-inspect"
        yield client


async def test_filters_narrow_the_list_and_the_export(inspected: httpx.AsyncClient) -> None:
    first = [{"id": f"a{i}", "text": "aaab"[: i + 1], "group_id": "ga"} for i in range(4)]
    second = [{"id": "b0", "text": "bad"}, {"id": "b1", "text": "xyz", "group_id": "gb"}]
    job_a = await _score(inspected, first)
    job_b = await _score(inspected, second, idempotency_key="key-b")
    listing = await _kept(inspected, 6)
    assert [s["id"] for s in listing["items"]] == ["b1", "b0", "a3", "a2", "a1", "a0"]
    assert {s["job"] for s in listing["items"]} == {job_a, job_b}

    async def ids(query: str) -> list[str]:
        answer = await inspected.get(f"/inspect/api/items?{query}")
        assert answer.status_code == 200, answer.text
        return [s["id"] for s in answer.json()["items"]]

    assert await ids("error=any") == ["b0"]
    assert await ids("error=bad_input") == ["b0"]
    assert await ids("error=none&max_reward=0") == ["b1"]
    assert await ids("min_reward=0.8") == ["a2", "a1", "a0"]
    assert await ids("group=ga&min_reward=0.7&max_reward=0.8") == ["a3"]
    assert await ids("key=key-b") == ["b1", "b0"]
    assert await ids("key=no-such-key") == []
    assert await ids(f"job={job_a}&item=a1") == ["a1"]
    refused = await inspected.get("/inspect/api/items?min_reward=1&max_reward=0")
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "min_reward"

    export = await inspected.get("/inspect/api/export.jsonl?group=ga")
    lines = [orjson.loads(line) for line in export.text.splitlines()]
    assert [r["summary"]["id"] for r in lines] == ["a3", "a2", "a1", "a0"]
    assert lines[0]["item"]["text"] == "aaab" and lines[0]["result"]["reward"] == 0.75

    stats = (await inspected.get("/inspect/api/stats")).json()
    toy = stats["scorers"]["toy"]
    assert toy["items"] == 6 and toy["scored"] == 5
    assert toy["error_share"] == {"bad_input": pytest.approx(1 / 6)}
    assert sum(toy["histogram"]["counts"]) == 5
    group_a = next(g for g in stats["groups"] if g["group"] == "ga")
    assert [i["reward"] for i in group_a["items"]] == [1.0, 1.0, 1.0, 0.75]

    detail = await inspected.get(f"/inspect/api/items/toy/{listing['items'][1]['rid']}")
    assert detail.json()["result"]["error"]["code"] == "bad_input"
    gone = await inspected.get("/inspect/api/items/toy/1-0")
    assert (
        gone.status_code == 404 and "TRIBUNAL_INSPECT_MAX_ITEMS" in gone.json()["error"]["message"]
    )


async def test_with_inspection_off_nothing_is_recorded() -> None:
    settings = CoreSettings(queue="memory", inspect_sample_rate=0.0)
    async for client in client_for(create_app(toy_spec(ToyVerifier()), settings)):
        await _score(client, [{"id": "x", "text": "abc"}])
        await _score(client, [{"id": "y", "text": "abc"}])  # its worker wrote x's record by now
        meta = (await client.get("/inspect/api/meta")).json()
        assert meta["recording"] is False and meta["kept"] == {"toy": 0}
        assert (await client.get("/inspect/api/items")).json() == {"total": 0, "items": []}


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (None, 401),
        ("Bearer wrong", 401),
        ("Bearer sk-inspect", 200),
        ("Basic " + base64.b64encode(b"anyone:sk-inspect").decode(), 200),
        ("Basic " + base64.b64encode(b"anyone:wrong").decode(), 401),
        ("Basic !!not-base64", 401),
    ],
)
async def test_the_page_and_its_data_need_the_api_key(
    inspected: httpx.AsyncClient, authorization: str | None, status: int
) -> None:
    headers = {"authorization": authorization or ""}
    for path in (
        "/inspect",
        "/inspect/api/items",
        "/inspect/api/signatures",
        "/inspect/static/inspect.js",
    ):
        answer = await inspected.get(path, headers=headers)
        assert answer.status_code == status, path
        if status == 401:
            assert 'Basic realm="Tribunal inspector"' in answer.headers.get_list("www-authenticate")


async def test_the_monitor_data_is_empty_where_nothing_audits(
    inspected: httpx.AsyncClient,
) -> None:
    # Only the gateway audits and counts hack signatures (tests/e2e/test_inspect_browser.py
    # reads its monitor view); another service's page says so instead of failing.
    for path in ("/inspect/api/audits", "/inspect/api/signatures"):
        answer = await inspected.get(path)
        assert answer.status_code == 200 and answer.json() == {"specs": []}, path


async def test_only_the_page_asks_a_browser_for_basic_credentials(
    inspected: httpx.AsyncClient,
) -> None:
    # Basic credentials carry the key on every guarded route (trainers' clients send them in
    # the URL: docs/integrations.md); a browser's prompt is asked for on /inspect alone.
    good = "Basic " + base64.b64encode(b"anyone:sk-inspect").decode()
    wrong = "Basic " + base64.b64encode(b"anyone:wrong").decode()
    path = "/v1/jobs/" + "0" * 32
    assert (await inspected.get(path, headers={"authorization": good})).status_code == 404
    refused = await inspected.get(path, headers={"authorization": wrong})
    assert refused.status_code == 401
    assert refused.headers.get_list("www-authenticate") == ["Bearer"]


async def test_the_page_is_served_offline_with_a_strict_policy(
    inspected: httpx.AsyncClient,
) -> None:
    page = await inspected.get("/inspect")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for asset in ("inspect.js", "inspect.css", "uPlot.iife.min.js", "uPlot.min.css"):
        assert f"inspect/static/{asset}" in page.text
        assert (await inspected.get(f"/inspect/static/{asset}")).status_code == 200
    assert "http" not in page.text.replace("http-equiv", "")  # nothing from another host
    assert (await inspected.get("/inspect/static/..%2Fstore.py")).status_code == 404


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


async def test_values_orjson_refuses_are_kept_and_an_unencodable_record_drops_alone(
    make_store: StoreFactory,
) -> None:
    # What the JSON layer (tribunal.wire.jsonparse) accepts: an integer past 64 bits and a
    # lone surrogate, both of which orjson refuses. Before, the batch was lost (the drain
    # task died on orjson's TypeError). Nesting past the recursion limit no encoder writes.
    store = make_store(100, 3600)
    items = [
        {"id": "big", "response": "x", "n": 2**70},
        {"id": "surrogate", "response": "\ud800"},
        {"id": "deep", "response": "x", "n": _nested(100_000)},
        {"id": "plain", "response": "x"},
    ]
    deliveries = [
        Delivery(f"{1_700_000_000_000 + i}-0", "j" * 32, i, item, None, 1)
        for i, item in enumerate(items)
    ]
    records = [keep(d, _result(i), "toy") for i, d in enumerate(deliveries)]
    assert await store.add("toy", records) == 1
    summaries = await store.summaries("toy")
    assert [s["index"] for s in summaries] == [3, 1, 0]
    big = await store.record("toy", summaries[-1]["rid"])
    assert big is not None and big["item"]["n"] == 2**70
    lone = await store.record("toy", summaries[1]["rid"])
    assert lone is not None and lone["item"]["response"] == "\ud800"


async def test_a_recorder_counts_what_it_drops_in_the_metrics() -> None:
    settings = CoreSettings(queue="memory", api_key="sk-inspect", cache_ttl_s=0)
    app = create_app(toy_spec(ToyVerifier()), settings)
    async for client in client_for(app):
        client.headers["authorization"] = "Bearer sk-inspect"
        recorder = app.state.runtime.recorders["toy"]
        done = [
            (Delivery(f"{1_700_000_000_000 + i}-0", "j" * 32, i, payload, None, 1), _result(i))
            for i, payload in enumerate(
                [{"n": _nested(100_000)}, {"n": 2**70, "group_id": "\ud800"}]
            )
        ]
        recorder.record(done)
        await recorder.aclose()
        assert recorder.dropped == 1
        text = (await client.get("/metrics")).text
        assert 'tribunal_inspect_dropped_total{verifier="toy"} 1.0' in text
        # The one kept is served by the list, the detail view and the export.
        listing = (await client.get("/inspect/api/items")).json()
        assert [s["group"] for s in listing["items"]] == ["\ud800"]
        rid = listing["items"][0]["rid"]
        detail = (await client.get(f"/inspect/api/items/toy/{rid}")).json()
        assert detail["item"]["n"] == 2**70
        export = (await client.get("/inspect/api/export.jsonl")).text.splitlines()
        assert len(export) == 1 and '"n": 1180591620717411303424' in export[0]
