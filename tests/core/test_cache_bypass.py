"""A repeat is served from the result cache; ``Cache-Control: no-cache`` scores afresh."""

from __future__ import annotations

import httpx

from tests.core.toy import ToyVerifier, toy_spec
from tribunal.core.app import create_app
from tribunal.core.settings import CoreSettings


async def test_no_cache_header_scores_again_on_both_routes() -> None:
    verifier = ToyVerifier()
    app = create_app(toy_spec(verifier), CoreSettings(queue="memory"))
    body = {"items": [{"id": "a", "text": "abc"}]}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            first = await client.post("/v1/toy/score", json=body)
            repeat = await client.post("/v1/toy/score", json=body)
            fresh = await client.post(
                "/v1/toy/score", json=body, headers={"cache-control": "no-cache"}
            )
            job = await client.post(
                "/v1/jobs", json={"verifier": "toy", **body}, headers={"cache-control": "no-cache"}
            )
            state = await client.get(f"/v1/jobs/{job.json()['job_id']}", params={"wait": 10})
    assert [r.json()["results"][0]["cached"] for r in (first, repeat, fresh)] == [
        False,
        True,
        False,
    ]
    assert state.json()["results"][0]["cached"] is False
    assert len(verifier.calls) == 3  # first, the no-cache score, the no-cache job
