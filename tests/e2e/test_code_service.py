"""The code service as real processes (API + worker + Redis) running real sandboxes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis

from bench import code_data
from tests.conftest import DATA, ROOT, RedisServer, RunningService, need_data, redis_env
from tribunal.core.supervisor import EXIT_REFUSED

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]

ADD = {
    "kind": "assert",
    "entry_point": "add",
    "test": (
        "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"
    ),
}


def env_for(redis: RedisServer, prefix: str) -> dict[str, str]:
    # A secret the service holds: no program may see it.
    return redis_env(
        redis, prefix, TRIBUNAL_CODE_SLOTS="2", TRIBUNAL_TEST_SECRET="hunter2-do-not-leak"
    )


def test_score_run_and_hostile_neighbours(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    running = service("code", env=env_for(redis_server, key_prefix))
    honest = {"language": "python", "code": "def add(a, b):\n    return a + b\n", "tests": ADD}
    hacks = [
        "import sys\ndef add(a, b):\n    return a + b\nprint('ALL TESTS PASSED')\nsys.exit(0)\n",
        (
            "class Yes:\n    def __eq__(self, other):\n        return True\n"
            "def add(a, b):\n    return Yes()\n"
        ),
        "import os\nos._exit(0)\n",
        "while True:\n    pass\n",
        "import os\nwhile True:\n    os.fork()\n",
    ]
    items = [{"id": f"honest{i}", **honest} for i in range(6)]
    items += [
        {
            "id": f"hack{i}",
            "language": "python",
            "code": code,
            "tests": ADD,
            "limits": {"timeout_s": 2},
        }
        for i, code in enumerate(hacks)
    ]
    with running.http(timeout_s=120) as client:
        with ThreadPoolExecutor(4) as pool:
            responses = list(
                pool.map(lambda item: client.post("/v1/code/score", json={"items": [item]}), items)
            )
        results = {r.json()["results"][0]["id"]: r.json()["results"][0] for r in responses}
        for i in range(6):
            assert results[f"honest{i}"]["reward"] == 1.0, results[f"honest{i}"]
            assert results[f"honest{i}"]["details"]["all_passed"] is True
        for i in range(len(hacks)):
            result = results[f"hack{i}"]
            assert result["error"] is None, result
            assert result["reward"] == 0.0, result
        run = client.post(
            "/v1/code/run",
            json={
                "language": "python",
                "code": (
                    "import os, sys\nprint(sys.stdin.read()[::-1])\n"
                    "print(os.environ.get('TRIBUNAL_TEST_SECRET'))"
                ),
                "stdin": "olleh",
            },
        )
        assert run.status_code == 200, run.text
        body = run.json()
        assert body["stdout"].splitlines() == ["hello", "None"]
        assert body["exit_code"] == 0 and body["verdict"] == "accepted"
        broken = client.post("/v1/code/run", json={"language": "python", "code": "("})
        assert broken.status_code == 200, broken.text
        assert broken.json()["verdict"] in {"compile_error", "runtime_error"}
        assert broken.json()["exit_code"] != 0
        looping = client.post(
            "/v1/code/run",
            json={
                "language": "python",
                "code": "while True:\n    pass",
                "limits": {"timeout_s": 1},
            },
        )
        assert looping.status_code == 200, looping.text
        assert looping.json()["verdict"] == "time_limit"
        bad = client.post("/v1/code/run", json={"language": "cobol", "code": "x"})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "language"
        assert client.get("/healthz").status_code == 200


def _has_int_past_64_bits(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_int_past_64_bits(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_int_past_64_bits(v) for v in value)
    return isinstance(value, int) and not -(2**63) <= value < 2**64


async def test_integers_past_64_bits_reach_the_program_as_integers(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    """Over HTTP as a trainer sends them: every LeetCode problem with such an argument (real
    data) and a hand-made one. The API once parsed bodies with orjson alone, which reads
    99999999999999999999 as 1e+20: the reference solution of smallest-divisible-digit-
    product-ii then failed, and ``str(x)`` gave ``1.1805916207174113e+21``."""
    need_data(DATA / "code")
    leetcode = [i for i in code_data.leetcode()[0] if _has_int_past_64_bits(i["tests"])]
    assert leetcode, "no LeetCode case has an integer past 64 bits any more"
    cases = [{"args": [n], "expected": str(n)} for n in (2**70, -(2**64))]
    as_text = {
        "id": "as_text",
        "language": "python",
        "code": "def as_text(x):\n    return str(x)\n",
        "tests": {"kind": "function", "entry_point": "as_text", "cases": cases},
    }
    running = service("code", env=env_for(redis_server, key_prefix))
    async with running.client(timeout=300) as client:
        results = await client.score("code", [as_text, *leetcode])
    assert [(r.id, r.reward) for r in results] == [(i["id"], 1.0) for i in [as_text, *leetcode]]


def test_the_service_refuses_to_start_when_it_cannot_isolate(
    redis_server: RedisServer, key_prefix: str
) -> None:
    env = {
        **os.environ,
        **env_for(redis_server, key_prefix),
        "TRIBUNAL_CODE_BWRAP_PATH": "/nonexistent/bwrap",
    }
    worker = subprocess.run(
        [sys.executable, "-m", "tribunal.cli", "worker", "code"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert worker.returncode == EXIT_REFUSED
    assert "refusing to start" in worker.stderr and "bubblewrap" in worker.stderr.lower()
    # The refusal is left in the queue, for the API's /readyz and submissions.
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        for name in ("code", "code_run"):
            assert "bubblewrap not found" in client.get(f"{key_prefix}:{name}:refusal")
    finally:
        client.close()
