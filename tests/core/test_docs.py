"""``/docs`` works without internet: Swagger UI's assets are served by the service itself
(issue 7: it loaded them from a CDN and was blank offline)."""

from __future__ import annotations

import re

import httpx

from tests.core.toy import ToyVerifier, toy_spec
from tribunal.core.app import create_app
from tribunal.core.settings import CoreSettings


async def test_docs_reference_only_assets_the_service_serves() -> None:
    app = create_app(toy_spec(ToyVerifier()), CoreSettings(queue="memory"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            page = await client.get("/docs")
            assert page.status_code == 200
            assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
            assert assets and all(a.startswith("/") for a in assets), assets
            for asset in assets:
                assert (await client.get(asset)).status_code == 200, asset
