"""A bounded schemathesis run (valid and invalid requests generated from the OpenAPI
document) against a real math API and worker: no 5xx, no status the document does not list.
``bench/faults.py`` runs the same over all three services with more examples."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.faults import fuzz
from tests.conftest import RedisServer, RunningService, redis_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_generated_requests_get_no_5xx_and_only_documented_statuses(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    running = service(
        "math",
        env=redis_env(
            redis_server,
            key_prefix,
            TRIBUNAL_MATH_PROCESSES="1",
        ),
    )
    counts = fuzz(running.base_url, examples=15)
    assert counts["requests"] > 50
    assert counts["5xx"] == 0 and counts["undocumented"] == 0, counts["examples"]
    assert counts["not_generated"] == 0, counts["examples"]
