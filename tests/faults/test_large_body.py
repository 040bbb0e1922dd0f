"""Issue 38: a large request body is parsed and validated off the API's event loop.

FastAPI parsed and validated a POST body on the API process's loop: for a 32 MiB batch, a
second or more in which the process answered nothing, its ``/healthz`` included. The body is
sent whole through a raw socket, and only then is ``/healthz`` polled. With the body's work on
a thread, health was answered 113 and 126 times before the body's answer arrived (load 9 on
2 cores); with it on the loop (``INLINE_BYTES`` raised past the body, by hand) 2 times (while
the last MiB of the body were still being read), and the test fails.

A parse in C (orjson, ``json``) holds the interpreter while it runs, on a thread too: for a
body of long strings the parse is most of the work, and the valid body's test says only that
such a body reaches its route (health answered 6 to 9 times before the answer there, 2 on the
loop).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import RunningService

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ITEMS = 4096
"""The most items a request may hold (``TRIBUNAL_MAX_BATCH_ITEMS``' default)."""


def _large_body(extra: str) -> bytes:
    """A ``/v1/math/score`` body of 4096 items and about 33 MiB, ending with ``extra``.

    Each item is invalid by a lone surrogate at the end of a list of 200 strings: the item
    is searched string by string for its path (Python on the validating thread, which lets
    the loop run between its steps; a single parse in C would not).
    """
    pad = "x" * 7200
    strings = '"a", ' * 200
    item = '{"id": "i%d", "response": "' + pad + '", "ground_truth": "2", '
    item += '"options": {"zz": [' + strings + '"\\ud800"]}}'
    items = ", ".join(item % n for n in range(ITEMS))
    return ('{"items": [' + items + "]" + extra + "}").encode()


def _post_raw(
    port: int, path: str, body: bytes, sent: threading.Event, answer: list[tuple[float, bytes]]
) -> None:
    """POST ``body`` to ``path``; set ``sent`` once the body is all written, and
    append (arrival time, first bytes) of the answer to ``answer``."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(head + body)
        sent.set()
        first = sock.recv(4096)
        arrived = time.monotonic()
        rest = b"".join(iter(lambda: sock.recv(1 << 16), b""))
        answer.append((arrived, first + rest))


@pytest.fixture
def math_api(service: Callable[..., RunningService]) -> RunningService:
    # No worker: the body is refused before anything is queued.
    return service("math", workers=0, env={"TRIBUNAL_QUEUE": "memory"})


def _health_before_answer(service: RunningService, path: str, body: bytes) -> tuple[int, bytes]:
    """POST ``body`` to ``path`` and poll ``/healthz`` from the moment it is all sent until
    the answer came; return how many health answers came before it, and the answer."""
    sent = threading.Event()
    answer: list[tuple[float, bytes]] = []
    poster = threading.Thread(target=_post_raw, args=(service.port, path, body, sent, answer))
    healthy: list[float] = []
    with httpx.Client(base_url=service.base_url, timeout=60) as client:
        assert client.get("/healthz").status_code == 200  # the connection is open
        poster.start()
        assert sent.wait(120)
        while poster.is_alive():
            assert client.get("/healthz").status_code == 200
            healthy.append(time.monotonic())
        poster.join()
    arrived, text = answer[0]
    return sum(1 for t in healthy if t < arrived), text


def test_health_is_answered_while_a_large_body_is_parsed_and_validated(
    math_api: RunningService,
) -> None:
    # An unknown top-level key: the body is refused, after every item was validated.
    body = _large_body(', "unknown": 1')
    assert len(body) > 32 * 2**20
    before, text = _health_before_answer(math_api, "/v1/math/score", body)
    assert text.startswith(b"HTTP/1.1 422"), text[:300]
    # The lone surrogate is the answer's cause (as for a small body), named by its path.
    assert b'"field":"items.0.options.zz.200"' in text, text[-300:]
    assert before >= 20, f"/healthz answered {before} times while the body was worked on"


def test_a_large_valid_body_validated_off_the_loop_reaches_its_route(
    math_api: RunningService,
) -> None:
    # The validated model is handed to FastAPI, which takes it as it is.
    item = '{"id": "i%d", "response": "' + "x" * 8200 + ' \\\\boxed{2}", "ground_truth": "2"}'
    items = ", ".join(item % n for n in range(ITEMS))
    body = ('{"verifier": "math", "items": [' + items + "]}").encode()
    assert len(body) > 32 * 2**20
    _, text = _health_before_answer(math_api, "/v1/jobs", body)
    assert text.startswith(b"HTTP/1.1 202"), text[:300]
    assert b'"job_id"' in text
