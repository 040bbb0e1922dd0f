"""``tribunal score`` end to end: 1,000 GSM8K items through a real math service (real Redis,
real processes), interrupted with Ctrl-C and resumed without scoring anything twice."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import (
    DATA,
    ROOT,
    TRIBUNAL,
    RedisServer,
    RunningService,
    need_data,
    redis_env,
    stop_process,
)
from tribunal.client.score_file import input_digest, read_items, score_items
from tribunal.core.registry import available_services, load_service
from tribunal.wire.ports import PORTS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GSM8K = DATA / "math" / "gsm8k_test.jsonl"


def gsm8k_items(n: int) -> list[dict[str, str]]:
    with need_data(GSM8K).open() as f:
        answers = [json.loads(line)["answer"] for line in f][:n]
    return [
        {"id": f"g{i}", "response": a, "ground_truth": a.split("####")[-1].strip()}
        for i, a in enumerate(answers)
    ]


def items_scored(base_url: str) -> float:
    """Items the service's workers gave a result (``tribunal_items_scored``, any outcome)."""
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    return sum(
        float(m) for m in re.findall(r"^tribunal_items_scored_total\{[^}]*\} (\S+)$", text, re.M)
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
def test_score_a_file_interrupt_and_resume(
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
    tmp_path: Path,
) -> None:
    items = gsm8k_items(1000)
    source = tmp_path / "rollouts.jsonl"
    source.write_text("".join(json.dumps(item) + "\n" for item in items))
    out = tmp_path / "results.jsonl"
    running = service(
        "math",
        env=redis_env(
            redis_server,
            key_prefix,
            TRIBUNAL_MATH_PROCESSES="1",
            TRIBUNAL_CACHE_TTL_S="0",  # a rescored item would be scored, not a cache hit
        ),
    )
    argv = [*TRIBUNAL, "score", "math", str(source), "-o", str(out), "--url", running.base_url]
    # Small chunks one at a time, so that Ctrl-C lands mid-run (1,000 is not a multiple of 12;
    # it is sent after 100 results, with ~75 chunks to go, so that a busy machine delaying
    # this test's polling does not let the run finish first).
    argv += ["--chunk-size", "12", "--concurrency", "1"]

    first = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(lines(out)) < 100 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)  # Ctrl-C
    _, first_err = first.communicate(timeout=60)
    kept = len(lines(out))
    assert first.returncode == 130, first_err
    assert "run the same command again to resume" in first_err
    assert 100 <= kept < 1000

    second = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert f"{kept} results kept from an earlier run" in second.stderr
    results = [json.loads(line) for line in lines(out)]
    assert [r["id"] for r in results] == [item["id"] for item in items]
    rewards = [r["reward"] for r in results]
    assert sum(r == 1.0 for r in rewards) >= 950  # gold solutions against their own answers
    summary = second.stderr.strip().splitlines()[-1]
    assert f"items 1000 (kept {kept}, scored {1000 - kept})" in summary
    assert "mean reward" in summary and "items/s" in summary
    # Jobs interrupted mid-wait were found again by their idempotency keys: every item was
    # scored exactly once across both runs.
    assert items_scored(running.base_url) == 1000

    third = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert third.returncode == 0 and "items 1000 (kept 1000, scored 0)" in third.stderr
    assert items_scored(running.base_url) == 1000


@pytest.mark.slow
def test_stdin_to_stdout_and_a_line_that_is_not_json(
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
    argv = [*TRIBUNAL, "score", "math", "-", "--url", running.base_url]
    good = '{"response": "#### 18", "ground_truth": "18"}\n{"response": "2", "ground_truth": "3"}\n'
    done = subprocess.run(argv, input=good, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["id"], r["reward"]) for r in results] == [("0", 1.0), ("1", 0.0)]
    assert "mean reward 0.5000" in done.stderr

    bad = subprocess.run(
        argv, input=good + "not json\n", capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert bad.returncode == 2 and "line 3: not JSON" in bad.stderr

    # Items the service refuses are results naming their line, and the rest is scored: in
    # chunks of 2, the second chunk has no valid item (the service answers each such item
    # with its error, as any other: issue 36), the first and third one each.
    refused = (
        '{"id": "a", "response": "#### 18", "ground_truth": "18"}\n'
        "\n"
        "[1, 2]\n"
        '{"id": 7, "response": "#### 18", "ground_truth": "18"}\n'
        '{"id": "b", "response": "#### 18"}\n'
        '{"response": "#### 18", "ground_truth": "18"}\n'
    )
    done = subprocess.run(
        [*argv, "--chunk-size", "2"], input=refused, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["id"], r["reward"]) for r in results] == [
        ("a", 1.0),
        ("1", None),
        ("2", None),
        ("b", None),
        ("4", 1.0),
    ]
    errors = [(r["error"]["field"], r["error"]["message"]) for r in results[1:4]]
    assert errors[1:] == [
        ("id", "line 4: id: Input should be a valid string"),
        ("ground_truth", "line 5: ground_truth: Field required"),
    ]
    assert errors[0][0] is None and errors[0][1].startswith("line 3: ")
    # Every item was answered by the service (its verifier named), none refused as a request.
    assert [r["verifier"] is None for r in results] == [False] * 5
    assert "errors: bad_input 3" in done.stderr


def test_a_missing_or_empty_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """No service runs: the input is refused before any request."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n \n")
    for path, reason in (
        (tmp_path / "missing.jsonl", "No such file or directory"),
        (empty, "no items (the input is empty)"),
    ):
        argv = [*TRIBUNAL, "score", "math", str(path), "--url", "http://127.0.0.1:9"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2
        assert done.stderr.strip() == f"{path}: {reason}"


@pytest.mark.slow
def test_the_command_loads_no_server_code_and_not_httpx_s_own_cli(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    """What ``tribunal score`` imports is its start-up cost (``bench/client_overhead.py``):
    neither the service it scores (FastAPI, Redis, the verifier) nor the command line of
    httpx (click, pygments), which httpx imports whenever they are installed. Without
    ``--url`` it finds the service on ``TRIBUNAL_MATH_PORT``, as ``tribunal api`` serves it."""
    running = service("math", env=redis_env(redis_server, key_prefix))
    port = str(httpx.URL(running.base_url).port)
    script = (
        "import sys\n"
        "from tribunal.cli import main\n"
        "sys.argv = ['tribunal', 'score', 'math', '-']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0, done.code\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)\n"
    )
    item = '{"id": "a", "response": "#### 18", "ground_truth": "18"}\n'
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=item,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TRIBUNAL_MATH_PORT": port},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reward"] == 1.0
    loaded = set(done.stderr.strip().splitlines()[-1].split())
    assert {"tribunal", "httpx", "typer"} <= loaded
    unwanted = {"fastapi", "starlette", "uvicorn", "redis", "math_verify", "sympy"}
    assert not loaded & (unwanted | {"click", "pygments"})


def test_an_unknown_verifier_without_url_is_refused_by_name() -> None:
    done = subprocess.run(
        [*TRIBUNAL, "score", "maths", "-"], input="", capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    message = " ".join(done.stderr.split())  # typer draws it in a box
    assert "unknown service 'maths'" in message and "--url" in message


def test_a_port_variable_that_is_not_a_port_is_refused_by_name() -> None:
    done = subprocess.run(
        [*TRIBUNAL, "score", "math", "-"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TRIBUNAL_MATH_PORT": "81o1"},
    )
    assert done.returncode == 2
    assert "TRIBUNAL_MATH_PORT='81o1' is not a port" in " ".join(done.stderr.split())


def test_the_default_ports_are_the_services_own() -> None:
    """``tribunal score`` without ``--url`` reads the registry's ports, not the services."""
    assert {name: load_service(name).port for name in available_services()} == PORTS


@pytest.mark.slow
async def test_a_chunk_past_the_synchronous_deadline_is_collected_as_its_job(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    env = redis_env(redis_server, key_prefix, TRIBUNAL_SYNC_TIMEOUT_S="0.3")
    running = service("math", env=env)
    worker = running.processes.pop("worker0")
    stop_process(worker)  # nothing is scored until a worker starts again, after the 504s
    lines_in = b"".join(
        json.dumps({"id": f"q{i}", "response": f"#### {i}", "ground_truth": str(i)}).encode()
        + b"\n"
        for i in range(10)
    )
    items = read_items(lines_in)
    out = io.BytesIO()
    async with running.client() as client:
        scoring = asyncio.create_task(
            score_items(client, "math", items, out, digest=input_digest(lines_in), chunk_size=4)
        )
        await asyncio.sleep(1.0)
        assert not scoring.done()
        running.start_worker(0)
        summary = await asyncio.wait_for(scoring, 60)
    results = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["id"] for r in results] == items.ids
    assert summary.scored == 10 and summary.mean_reward == 1.0


def test_lines_orjson_refuses_or_would_change_go_as_written_and_a_broken_line_is_named() -> None:
    data = (
        b'{"id": "a", "response": "1", "ground_truth": NaN}\n'
        b"\n"
        b'{"response": "x \\ud800", "ground_truth": "2"}\n'
        b'{"response": "\xc3\xa9", "ground_truth": "3"}\n'
        b'{"tests": {"cases": [{"args": [99999999999999999999]}]}}\n'  # orjson: 1e+20
    )
    items = read_items(data)
    assert items.ids == ["a", "1", "2", "3"] and items.lines == [1, 3, 4, 5]
    assert b"[99999999999999999999]" in items.texts[3]
    assert items.texts[0] == b'{"id": "a", "response": "1", "ground_truth": NaN}'
    assert json.loads(items.texts[1]) == {"response": "x \ud800", "ground_truth": "2", "id": "1"}
    assert json.loads(items.texts[2]) == {"response": "é", "ground_truth": "3", "id": "2"}
    with pytest.raises(ValueError, match="line 2: not JSON"):
        read_items(b'{"id": "a"}\n{"id": \n')
    with pytest.raises(ValueError, match="line 1: not JSON"):
        read_items(b'{"id": "\xff"}\n')
