"""Every text field of every route of the code service refuses text that is not Unicode.

A lone surrogate escape (``"\\ud800"``) is valid JSON and decodes to a Python ``str``, but it
is no Unicode text: it can be neither hashed nor written back. ``/run_code`` once let it
through its request model into the run item built from it, which refused it inside the route:
HTTP 500. The cases are generated: each string value and each key of a full body of each route
(every optional field set) gets a lone surrogate, and the answer must refuse it by name: a 422
naming the field, or, on the batch routes, that item's ``bad_input`` naming it. Never a 500.
The API runs in process (``httpx.ASGITransport``) with its real verifiers; a refused item never
reaches a sandbox.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tribunal.code.api import create_app
from tribunal.code.settings import CodeSettings

BAD = "\ud800"

STDIO = {
    "id": "s",
    "group_id": "g",
    "language": "python",
    "code": "print(input())",
    "tests": {"kind": "stdio", "cases": [{"stdin": "1\n", "stdout": "1\n"}]},
    "limits": {"timeout_s": 2.0, "memory_mb": 256, "max_output_bytes": 4096},
    "options": {"all_or_nothing": True, "stop_on_first_failure": True, "float_tolerance": 0.1},
}
FUNCTION = {
    "id": "f",
    "language": "python",
    "response": "```python\ndef f(x, y=''):\n    return x\n```",
    "tests": {
        "kind": "function",
        "entry_point": "f",
        "cases": [{"args": ["a"], "kwargs": {"y": "b"}, "expected": {"k": "a"}}],
    },
}
ASSERT = {
    "id": "a",
    "language": "python",
    "code": "def f(x):\n    return x\n",
    "tests": {"kind": "assert", "entry_point": "f", "test": "def check(c):\n    assert c(1)"},
}
RUN = {"id": "r", "group_id": "g", "language": "python", "code": "print(1)", "stdin": "x"}
RUN_CODE = {
    "code": "print(1)",
    "language": "python",
    "stdin": "x",
    "compile_timeout": 10,
    "run_timeout": 10,
    "memory_limit_MB": 256,
    "files": {"a.txt": "eA=="},
    "fetch_files": ["b.txt"],
}
BODIES: dict[str, dict[str, Any]] = {
    "/v1/code/run": RUN,
    "/run_code": RUN_CODE,
    **{f"/v1/code/score#{item['id']}": {"items": [item]} for item in (STDIO, FUNCTION, ASSERT)},
    **{
        f"/v1/jobs#{item['id']}": {"verifier": verifier, "idempotency_key": "k", "items": [item]}
        for verifier, item in (
            ("code", STDIO),
            ("code", FUNCTION),
            ("code", ASSERT),
            ("code_run", RUN),
        )
    },
}


def text_places(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every string value and of every key (as ``(*path, ("key", name))``)."""
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield (*path, ("key", key))
            yield from text_places(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from text_places(inner, (*path, index))


def spoil(value: Any, path: tuple[Any, ...]) -> Any:
    """``value`` with a lone surrogate appended to the string (or key) at ``path``."""
    head, *rest = path
    if isinstance(head, tuple):  # a key
        return {(k + BAD if k == head[1] else k): v for k, v in value.items()}
    copy = list(value) if isinstance(value, list) else dict(value)
    copy[head] = value[head] + BAD if not rest else spoil(value[head], tuple(rest))
    return copy


CASES = [
    pytest.param(route, place, id=f"{route}:{'.'.join(map(str, place))}")
    for route, body in BODIES.items()
    for place in text_places(body)
]


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(CodeSettings(queue="memory"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield client


def named(field: str, place: tuple[Any, ...]) -> bool:
    """Whether ``field`` (a dotted path) names ``place``, the spoiled string or key."""
    last = place[-1]
    if isinstance(last, tuple):
        return "\\ud800" in field and last[1] in field
    return field.endswith(".".join(str(part) for part in place[1:] if part != "items")) or (
        field == str(last)
    )


@pytest.mark.parametrize(("route", "place"), CASES)
async def test_invalid_text_is_refused_by_name(
    client: httpx.AsyncClient, route: str, place: tuple[Any, ...]
) -> None:
    body = spoil(BODIES[route], place)
    if body.get("idempotency_key") == "k":
        # A job of invalid items is accepted (each item answered with its error): each case
        # needs a key of its own, or the next batch under "k" is a 409.
        body["idempotency_key"] = f"k-{uuid.uuid4().hex}"
    # json.dumps writes the lone surrogate as its escape: valid JSON, invalid text.
    content = json.dumps(body).encode()
    assert b"\\ud800" in content
    response = await client.post(
        route.split("#")[0], content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code != 500, response.text
    if response.status_code == 422:
        error = response.json()["error"]
        assert error["code"] == "bad_input" and "surrogate" in error["message"]
        where = place[-1][1] if isinstance(place[-1], tuple) else str(place[-1])
        assert where in error["message"] or where.replace("_", " ") in error["message"]
        return
    # A batch route: the spoiled item alone fails, as bad_input naming its field.
    assert route != "/v1/code/run" and route != "/run_code", response.text
    assert place[0] == "items", response.text
    if route.startswith("/v1/jobs"):
        assert response.status_code == 202, response.text
        job = response.json()["job_id"]
        response = await client.get(f"/v1/jobs/{job}", params={"wait": 30})
    [bad] = response.json()["results"]
    assert bad["reward"] is None and bad["error"]["code"] == "bad_input", bad
    assert "surrogate" in bad["error"]["message"]
    assert named(bad["error"]["field"], place), (bad["error"]["field"], place)
