"""Issue 7, defects 9, 10 and 11 over real HTTP against a real math API process.

9. Every error has the one body shape and names its field (``body`` with line and column for
   malformed JSON, ``content-type`` for a body that is not JSON; invalid UTF-8 and deep
   nesting too), and every status a route answers is in its OpenAPI document.
10. The bearer token is checked before the body is read.
11. ``/v1/jobs`` is a union tagged by ``verifier`` with each verifier's item schema; numbers
    are strict (``true`` is not 1); other methods answer 405 with ``Allow``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import RedisServer, RunningService, redis_env
from tribunal.wire.code import CodeItem

pytestmark = pytest.mark.e2e

ITEM = {"id": "a", "response": "\\boxed{2}", "ground_truth": "2"}
ERROR_KEYS = {"code", "message", "field", "retryable", "job_id"}


@pytest.fixture
def math_api(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> Callable[..., RunningService]:
    def start(**env: str) -> RunningService:
        return service(
            "math",
            env=redis_env(redis_server, key_prefix, **{"TRIBUNAL_MATH_PROCESSES": "1", **env}),
        )

    return start


def _documented(document: dict[str, Any], path: str, method: str, status: int) -> bool:
    return str(status) in document["paths"][path][method]["responses"]


def _error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == ERROR_KEYS, body
    error: dict[str, Any] = body["error"]
    return error


@pytest.mark.parametrize(
    ("content", "content_type", "field", "says"),
    [
        (b'{"items": [\n  {"id": "a",}\n]}', "application/json", "body", "line 2 column"),
        (b'{"items": []}', "text/plain", "content-type", "application/json"),
        (b'{"items": [{"id": "\xff\xfe"}]}', "application/json", "body", "UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "application/json", "body", "nested"),
        (b"", "application/json", "body", "body"),
    ],
    ids=["malformed", "content-type", "utf-8", "deep", "empty"],
)
def test_unreadable_bodies_get_the_one_error_shape_naming_the_field(
    math_api: Callable[..., RunningService],
    content: bytes,
    content_type: str,
    field: str,
    says: str,
) -> None:
    running = math_api()
    with running.http() as client:
        document = client.get("/openapi.json").json()
        for path in ("/v1/math/score", "/v1/jobs"):
            response = client.post(path, content=content, headers={"content-type": content_type})
            assert response.status_code == 422, response.text
            error = _error(response)
            assert error["code"] == "bad_input" and error["field"] == field
            assert says in error["message"]
            assert _documented(document, path, "post", response.status_code)


def test_other_methods_answer_405_with_allow(math_api: Callable[..., RunningService]) -> None:
    running = math_api()
    with running.http() as client:
        for method, path, allow in (
            ("TRACE", "/v1/math/score", "POST"),
            ("PUT", "/v1/jobs", "POST"),
            ("DELETE", f"/v1/jobs/{'0' * 32}", "GET"),
        ):
            response = client.request(method, path)
            assert response.status_code == 405, response.text
            assert response.headers["allow"] == allow
            assert _error(response)["code"] == "method_not_allowed"


def test_the_token_is_checked_before_the_body_is_read(
    math_api: Callable[..., RunningService],
) -> None:
    running = math_api(TRIBUNAL_API_KEY="s3cret")
    with running.http() as client:
        malformed = client.post(
            "/v1/math/score", content=b"{", headers={"content-type": "application/json"}
        )
        assert malformed.status_code == 401 and _error(malformed)["code"] == "unauthorized"
        ok = client.post(
            "/v1/math/score", json={"items": [ITEM]}, headers={"authorization": "Bearer s3cret"}
        )
        assert ok.status_code == 200
    # 30 MB announced and none of it sent: the answer comes without waiting for the body.
    url = urlsplit(running.base_url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/math/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 30000000\r\n\r\n"
        )
        head = sock.recv(4096).decode("latin-1")
    assert head.startswith("HTTP/1.1 401"), head


def test_jobs_is_a_union_tagged_by_verifier_with_strict_numbers(
    math_api: Callable[..., RunningService],
) -> None:
    running = math_api()
    with running.http() as client:
        document = client.get("/openapi.json").json()
        schema = document["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]
        job = document["components"]["schemas"]["MathJobCreate"]
        assert schema["application/json"]["schema"]["$ref"].endswith("/MathJobCreate")
        assert job["properties"]["verifier"]["const"] == "math"
        assert job["properties"]["items"]["items"]["$ref"].endswith("/MathItem")

        unknown = client.post("/v1/jobs", json={"verifier": "maths", "items": [ITEM]})
        assert unknown.status_code == 422 and _error(unknown)["field"] == "verifier"
        # An item's unknown option is refused by name, as that item's error (issue 36: never
        # the request's, even for a batch of one).
        item = {**ITEM, "options": {"float_rounding": True}}
        for body, path in (
            ({"verifier": "math", "items": [item]}, "/v1/jobs"),
            ({"items": [item]}, "/v1/math/score"),
        ):
            response = client.post(path, json=body)
            assert response.status_code in (200, 202), response.text
            if path == "/v1/jobs":
                job = response.json()["job_id"]
                response = client.get(f"/v1/jobs/{job}", params={"wait": 30})
            [result] = response.json()["results"]
            assert result["reward"] is None and result["error"]["code"] == "bad_input"
            assert result["error"]["field"] == "items.0.options.float_rounding"


def test_code_limits_are_strict_numbers() -> None:
    item = {
        "id": "c",
        "language": "python",
        "code": "print(1)",
        "tests": {"kind": "stdio", "cases": [{"stdin": "", "stdout": "1"}]},
    }
    CodeItem.model_validate({**item, "limits": {"timeout_s": 2}})
    for limits in ({"timeout_s": True}, {"memory_mb": True}, {"memory_mb": 1.5}):
        with pytest.raises(ValueError, match="limits"):
            CodeItem.model_validate({**item, "limits": limits})
