"""Issue 7, defects 5, 6 and 7 against real processes (math API + worker, real Redis).

5. A lone surrogate (``"x \\ud800"``) in a string answered 500 and dropped the connection.
6. A job id containing ``:results`` reached a Redis key unescaped and answered 500.
7. A batch larger than the queue bound got a retryable 429 for ever.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import RedisServer, RunningService, redis_env

pytestmark = pytest.mark.e2e

GOOD = '{"id": "ok", "response": "\\\\boxed{2}", "ground_truth": "2"}'


@pytest.fixture
def math_service(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> RunningService:
    return service(
        "math",
        env=redis_env(
            redis_server,
            key_prefix,
            TRIBUNAL_MAX_QUEUE_ITEMS="5",
            TRIBUNAL_MATH_PROCESSES="1",
        ),
    )


@pytest.mark.parametrize(
    ("bad_item", "field", "item_id"),
    [
        ('{"id": "b", "response": "x \\ud800", "ground_truth": "2"}', "items.0.response", "b"),
        ('{"id": "x \\udfff", "response": "2", "ground_truth": "2"}', "items.0.id", "0"),
        ('{"id": "b", "response": "2", "ground_truth": "2", "\\ud800": 1}', None, "b"),
        ('{"id": "b", "response": "2", "ground_truth": "2", "options": {"\\ud800": 1}}', None, "b"),
    ],
)
def test_a_lone_surrogate_is_bad_input_naming_its_field(
    math_service: RunningService, bad_item: str, field: str | None, item_id: str
) -> None:
    body = '{"items": [' + bad_item + ", " + GOOD + "]}"
    with math_service.http() as client:
        for path in ("/v1/math/score", "/v1/jobs"):
            content = body if path.endswith("score") else body[:-1] + ', "verifier": "math"}'
            response = client.post(
                path, content=content.encode(), headers={"content-type": "application/json"}
            )
            assert response.status_code in (200, 202), response.text
            if path.endswith("jobs"):
                response = client.get(f"/v1/jobs/{response.json()['job_id']}", params={"wait": 30})
            bad, good = response.json()["results"]
            assert bad["id"] == item_id and bad["reward"] is None
            assert bad["error"]["code"] == "bad_input"
            if field is not None:
                assert bad["error"]["field"] == field
            else:  # the unknown key, written as an escape
                assert "\\ud800" in bad["error"]["field"]
            assert good["reward"] == 1.0
        # the connection was kept: the same client goes on
        assert client.get("/healthz").status_code == 200


def test_a_lone_surrogate_in_a_request_field_is_a_422_naming_it(
    math_service: RunningService,
) -> None:
    with math_service.http() as client:
        response = client.post(
            "/v1/jobs",
            content=(
                '{"verifier": "math", "idempotency_key": "k\\ud800", "items": [' + GOOD + "]}"
            ).encode(),
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == "idempotency_key"
        response = client.post(
            "/v1/math/score",
            content=('{"\\ud800": 1, "items": [' + GOOD + "]}").encode(),
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "bad_input"


@pytest.mark.parametrize("suffix", [":results", "", "ABCDEF", "%F0%9F%92%A9", "x" * 200], ids=repr)
def test_a_job_id_not_of_the_issued_format_is_404(
    math_service: RunningService, suffix: str
) -> None:
    with math_service.http() as client:
        created = client.post(
            "/v1/jobs",
            json={"verifier": "math", "items": [{"id": "a", "response": "1", "ground_truth": "1"}]},
        )
        real = created.json()["job_id"]
        done = client.get(f"/v1/jobs/{real}", params={"wait": 30})  # its results hash exists
        assert done.json()["status"] == "done"
        job_id = real + suffix if suffix else real.upper()
        response = client.get(f"/v1/jobs/{job_id}")
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "job_not_found"
        assert response.json()["error"]["field"] == "job_id"


def test_a_batch_that_can_never_fit_the_queue_is_413_naming_items_and_the_bound(
    math_service: RunningService,
) -> None:
    items = [{"id": str(i), "response": str(i), "ground_truth": str(i)} for i in range(6)]
    with math_service.http() as client:
        for path, body in (
            ("/v1/math/score", {"items": items}),
            ("/v1/jobs", {"verifier": "math", "items": items}),
        ):
            response = client.post(path, json=body)
            assert response.status_code == 413, response.text
            error = response.json()["error"]
            assert error["field"] == "items" and error["retryable"] is False
            assert "(5," in error["message"]
        fits = client.post("/v1/math/score", json={"items": items[:5]})
        assert fits.status_code == 200


def test_a_lone_surrogate_on_a_route_of_one_item_is_a_422(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    # /v1/code/run validates its one item strictly (no per-item leniency): still no 500.
    running = service(
        "code",
        env=redis_env(
            redis_server,
            key_prefix,
            TRIBUNAL_CODE_SLOTS="1",
        ),
    )
    with running.http() as client:
        response = client.post(
            "/v1/code/run",
            content=b'{"language": "python", "code": "print(1) # \\ud800"}',
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "bad_input" and "code" in error["message"]
        assert "surrogate" in error["message"]
