"""``/v1/code/sessions`` on the embedded queue: the API and its in-process worker in one app
(real sandboxes; the route of a call is the same per-worker stream as on Redis)."""

from __future__ import annotations

import asyncio
import shutil

import httpx
import pytest

from tribunal.code.api import create_app
from tribunal.code.settings import CodeServiceConfig, CodeSettings

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.mark.slow
async def test_sessions_on_the_embedded_queue() -> None:
    settings = CodeSettings(queue="memory", code=CodeServiceConfig(slots=1, max_sessions=1))
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            started = await client.post("/v1/code/sessions", json={"idle_ttl_s": 30.0})
            assert started.status_code == 201, started.text
            info = started.json()
            assert info["idle_ttl_s"] == 30.0
            run = f"/v1/code/sessions/{info['session_id']}/run"
            assert (await client.post(run, json={"code": "n = 6"})).json()["status"] == "ok"
            answer = (await client.post(run, json={"code": "n * 7"})).json()
            assert answer["display"] == "42" and answer["session_alive"] is True
            full = await client.post("/v1/code/sessions", json={})
            assert full.status_code == 429 and full.json()["error"]["code"] == "sessions_full"
            unknown = await client.post("/v1/code/sessions", json={"language": "ruby"})
            assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "language"
            closed = await client.delete(f"/v1/code/sessions/{info['session_id']}")
            assert closed.status_code == 204
            lost = await client.post(run, json={"code": "n"})
            assert lost.status_code == 410 and "closed" in lost.json()["error"]["message"]
            # The worker's reaper (every second) ends a session idle past its TTL.
            idle = (await client.post("/v1/code/sessions", json={"idle_ttl_s": 0.5})).json()
            await asyncio.sleep(3.0)
            expired = await client.post(
                f"/v1/code/sessions/{idle['session_id']}/run", json={"code": "1"}
            )
            assert expired.status_code == 410, expired.text
            assert "idle for more than its TTL of 0.5 s" in expired.json()["error"]["message"]
