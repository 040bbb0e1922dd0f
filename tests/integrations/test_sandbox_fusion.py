"""SandboxFusion's ``/run_code`` on the code service, called by SandboxFusion's own released
SDK (``sandbox-fusion==0.3.7``, pinned in the lock): its sync and async clients, its result
summary, and the raw payload verl's ``sandbox_fusion`` utilities send (``memory_limit_MB``,
``stdin: null``). Real processes (API, worker, Redis) and real sandboxes; nothing is mocked."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable

import httpx
import pytest
from sandbox_fusion import (
    RunCodeRequest,
    RunStatus,
    SummaryMapping,
    run_code,
    run_code_async,
    summary_run_code_result,
)

from tests.conftest import RedisServer, RunningService, redis_env

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]

MAPPING = SummaryMapping(
    CompileFailed="compile_failed", RunFailed="run_failed", RunTimeout="run_timeout"
)


@pytest.fixture
def code_url(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> str:
    return service(
        "code", env=redis_env(redis_server, key_prefix, TRIBUNAL_CODE_SLOTS="2")
    ).base_url


def test_the_sdk_runs_python_and_cpp_and_reads_every_ending(code_url: str) -> None:
    def run(**fields: object) -> object:
        return run_code(RunCodeRequest(**fields), endpoint=code_url, max_attempts=1)

    ok = run(code="print(input()[::-1])", language="python", stdin="olleh\n")
    assert ok.status == RunStatus.Success and ok.compile_result is None
    assert ok.run_result.stdout == "hello\n" and ok.run_result.return_code == 0
    assert ok.run_result.execution_time is not None and ok.run_result.execution_time > 0
    assert summary_run_code_result(ok, MAPPING) == "Success"

    raised = run(code="raise SystemExit(3)", language="python")
    assert raised.status == RunStatus.Failed and raised.run_result.return_code == 3
    assert summary_run_code_result(raised, MAPPING) == "run_failed"

    slow = run(code="while True:\n    pass\n", language="python", run_timeout=1)
    assert slow.run_result.status == "TimeLimitExceeded"
    assert summary_run_code_result(slow, MAPPING) == "run_timeout"

    cpp = (
        "#include <cstdio>\n"
        'int main() { int a, b; scanf("%d %d", &a, &b); printf("%d\\n", a + b); }\n'
    )
    added = run(code=cpp, language="cpp", stdin="2 40\n")
    assert added.status == RunStatus.Success and added.run_result.stdout == "42\n"
    assert added.compile_result is not None and added.compile_result.return_code == 0

    broken = run(code="int main() { return }", language="cpp")
    assert broken.status == RunStatus.Failed and broken.run_result is None
    assert broken.compile_result.return_code == 1 and "error" in broken.compile_result.stderr
    assert summary_run_code_result(broken, MAPPING) == "compile_failed"


def test_a_language_tribunal_does_not_run_is_refused_by_name(code_url: str) -> None:
    with pytest.raises(Exception, match="language 'go' is not run by Tribunal's sandbox"):
        run_code(
            RunCodeRequest(code="package main", language="go"), endpoint=code_url, max_attempts=1
        )


def test_the_async_client_runs_concurrently(code_url: str) -> None:
    async def main() -> list[object]:
        requests = [RunCodeRequest(code=f"print({i} * {i})", language="python") for i in range(6)]
        return await asyncio.gather(
            *(run_code_async(r, endpoint=code_url, max_attempts=1) for r in requests)
        )

    answers = asyncio.run(main())
    assert [a.run_result.stdout for a in answers] == [f"{i * i}\n" for i in range(6)]


def test_verls_payload_and_the_fields_that_are_refused(code_url: str) -> None:
    # What verl's sandbox_fusion utils post: SandboxFusion's fields plus memory_limit_MB.
    verl = {
        "code": "import sys\nprint(sum(map(int, sys.stdin.read().split())))",
        "stdin": "1 2 3",
        "language": "python",
        "compile_timeout": 10,
        "run_timeout": 10,
        "memory_limit_MB": 256,
        "files": {},
        "fetch_files": [],
    }
    answer = httpx.post(f"{code_url}/run_code", json=verl, timeout=60).json()
    assert answer["status"] == "Success" and answer["run_result"]["stdout"] == "6\n"
    no_stdin = httpx.post(f"{code_url}/run_code", json={**verl, "stdin": None}, timeout=60)
    assert no_stdin.json()["run_result"]["stdout"] == "0\n"
    files = httpx.post(f"{code_url}/run_code", json={**verl, "files": {"a.txt": "eA=="}})
    assert files.json() == {
        "status": "SandboxError",
        "message": "files: Tribunal's sandbox takes no files",
        "compile_result": None,
        "run_result": None,
        "executor_pod_name": None,
        "files": {},
    }
    unknown = httpx.post(f"{code_url}/run_code", json={**verl, "memory_limit": 256})
    assert unknown.status_code == 422 and "memory_limit" in unknown.text


def test_with_an_api_key_the_sdk_gets_in_by_the_urls_basic_credentials(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    # The SDK posts with requests and no header; requests sends a URL's user information as
    # Basic credentials, whose password the service compares with its key.
    key = "k3y-for-the-sdk"
    env = redis_env(redis_server, key_prefix, TRIBUNAL_CODE_SLOTS="1", TRIBUNAL_API_KEY=key)
    running = service("code", env=env)
    host = running.base_url.removeprefix("http://")
    request = RunCodeRequest(code="print(6 * 7)", language="python")
    answer = run_code(request, endpoint=f"http://sdk:{key}@{host}", max_attempts=1)
    assert answer.status == RunStatus.Success and answer.run_result.stdout == "42\n"
    refused = httpx.post(f"{running.base_url}/run_code", json=request.dict())
    assert refused.status_code == 401
