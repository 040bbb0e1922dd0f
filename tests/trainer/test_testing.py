"""The stand-in reward server over real HTTP: the real service's job shapes (read back through
``tribunal.client`` and the envelope's models) and its idempotency rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tribunal.client import JobNotFoundError, RequestRejected, TribunalClient
from tribunal.trainer.testing import StandInRewardServer
from tribunal.wire.envelope import JobCreated, JobState


@pytest.fixture
def server() -> Iterator[StandInRewardServer]:
    def score(item: dict[str, Any]) -> float | str | None:
        return {"?": None, "!": "sandbox_error"}.get(item["response"], 0.5)

    running = StandInRewardServer(score).start()
    yield running
    running.stop()


def items(*responses: str) -> list[dict[str, Any]]:
    return [{"id": f"i{n}", "response": r} for n, r in enumerate(responses)]


def test_a_repeated_key_answers_the_first_job_with_created_false(
    server: StandInRewardServer,
) -> None:
    def create(key: str | None, batch: list[dict[str, Any]]) -> httpx.Response:
        body = {"verifier": "math", "items": batch, "idempotency_key": key}
        return httpx.post(f"{server.url}/v1/jobs", json=body)

    first = create("k1", items("a", "b"))
    again = create("k1", items("a", "b"))
    other_key = create("k2", items("a", "b"))
    no_key = [create(None, items("a")) for _ in range(2)]
    assert [r.status_code for r in (first, again, other_key, *no_key)] == [202] * 5
    first_job, again_job = (JobCreated.model_validate_json(r.content) for r in (first, again))
    assert first_job.created and not again_job.created
    assert again_job.job_id == first_job.job_id
    other_job = JobCreated.model_validate_json(other_key.content)
    assert other_job.created and other_job.job_id != first_job.job_id
    assert all(JobCreated.model_validate_json(r.content).created for r in no_key)
    assert len(server.jobs) == 4


async def test_results_and_errors_read_back_through_the_client(
    server: StandInRewardServer,
) -> None:
    async with TribunalClient(server.url, max_retries=0) as client:
        job_id = await client.submit("math", items("a", "?", "!"), idempotency_key="k")
        results = await client.wait(job_id, timeout_s=10)
        state = await client.job(job_id)
        with pytest.raises(RequestRejected) as conflict:
            await client.submit("math", items("b"), idempotency_key="k")
        with pytest.raises(JobNotFoundError) as missing:
            await client.job("0" * 32)
    assert isinstance(state, JobState) and state.verifier == "math"
    assert (state.status, state.total, state.completed) == ("done", 3, 3)
    assert [r.reward for r in results] == [0.5, None, None]
    assert results[0].error is None and results[0].verifier.name == "stand_in"
    assert results[1].error is not None and results[1].error.code == "bad_input"
    assert results[2].error is not None and results[2].error.retryable
    assert conflict.value.status == 409 and conflict.value.code == "idempotency_conflict"
    assert conflict.value.field == "idempotency_key"
    assert missing.value.field == "job_id"
