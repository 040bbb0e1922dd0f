"""``run_code`` (``POST /v1/code/run``) against the real code service: API, worker, Redis and
bubblewrap sandboxes as real processes."""

from __future__ import annotations

import shutil
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import RedisServer, RunningService, free_port, redis_env
from tribunal.client import RequestRejected, SyncTribunalClient, TransportError, TribunalClient
from tribunal.wire.code import Limits, RunDetails, RunItem
from tribunal.wire.code_verdicts import TestVerdict

pytestmark = pytest.mark.e2e

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.fixture
def code(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> RunningService:
    return service("code", env=redis_env(redis_server, key_prefix, TRIBUNAL_CODE_SLOTS="2"))


@pytest.mark.slow
@needs_bwrap
async def test_a_run_comes_back_typed_whether_it_succeeds_or_fails(code: RunningService) -> None:
    reverse = RunItem(id="rev", language="python", code="print(input()[::-1])", stdin="olleh\n")
    async with code.client() as client:
        ran = await client.run_code(reverse)
        # a dict of the fields works too, without an id (the route's default)
        crashed = await client.run_code(
            {"language": "py", "code": "import sys\nprint('half')\nsys.exit('boom')"}
        )
        looping = await client.run_code(
            RunItem(
                id="loop",
                language="python",
                code="while True:\n    pass",
                limits=Limits(timeout_s=1.0),
            )
        )
    assert isinstance(ran, RunDetails)
    assert ran.stdout == "hello\n" and ran.stderr == ""
    assert ran.exit_code == 0 and ran.verdict is TestVerdict.ACCEPTED
    assert ran.time_ms is not None and ran.time_ms > 0
    # a program that fails is a run with its verdict, not an exception
    assert crashed.stdout == "half\n" and "boom" in crashed.stderr
    assert crashed.exit_code == 1 and crashed.verdict is TestVerdict.RUNTIME_ERROR
    assert looping.verdict is TestVerdict.TIME_LIMIT


@pytest.mark.slow
@needs_bwrap
def test_a_bad_item_is_rejected_naming_its_field(code: RunningService) -> None:
    with SyncTribunalClient(code.base_url) as client:
        with pytest.raises(RequestRejected) as language:
            client.run_code({"language": "cobol", "code": "x"})
        with pytest.raises(RequestRejected) as limit:
            client.run_code(
                {"language": "python", "code": "print(1)", "limits": {"timeout_s": -1.0}}
            )
        # the service stays usable through the same client after its refusals
        assert client.run_code({"language": "python", "code": "print(2)"}).stdout == "2\n"
    assert language.value.status == 422 and language.value.code == "bad_input"
    assert language.value.field == "language"
    assert limit.value.status == 422 and limit.value.field == "limits.timeout_s"


async def test_no_service_is_a_transport_error_that_keeps_the_httpx_cause() -> None:
    async with TribunalClient(f"http://127.0.0.1:{free_port()}", max_retries=0) as client:
        with pytest.raises(TransportError) as caught:
            await client.run_code({"language": "python", "code": "print(1)"})
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
