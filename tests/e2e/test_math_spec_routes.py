"""Every spec route with an undecided component, an undefined formula and a numeric label.

Issue 36: a math timeout made the item's whole reward the spec's ``undecided_reward`` (or an
error), a formula that divided by a component answered HTTP 500 on ``/get_reward``, and a
float label below 1e-4 reached the verifier as ``1e-07``, read as e - 7. Here the math
service and the gateway run as processes (memory queue), and ``/v1/score``,
``/get_reward/{spec}`` and ``/slime/{spec}`` are each asked: none answers 5xx.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import shared_service

pytestmark = pytest.mark.e2e

OVERFLOW = """
name: overflow
version: "1"
components:
  math: {verifier: math, inputs: {response: response, ground_truth: ground_truth}}
formula: "(math + 1) * 1e308 * 10"
undecided_reward: 0.0
"""
TOWER = "It is \\boxed{9^{9^{9^{9}}}}."
PROMPT = "<|im_start|>user\nWhat is 3+4?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def gateway_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A math service and a gateway, started once: both tests only score through them."""
    specs = tmp_path_factory.mktemp("specs")
    (specs / "overflow.yaml").write_text(OVERFLOW)
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    with shared_service(request, "math", env={**memory, "TRIBUNAL_MATH_TIMEOUT_S": "2"}) as math:
        env = {**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url}
        env["TRIBUNAL_GATEWAY_SPECS_DIR"] = str(specs)
        with shared_service(request, "gateway", env=env) as gateway:
            yield gateway.base_url


def test_no_spec_route_answers_5xx_for_an_item(gateway_url: str) -> None:
    with httpx.Client(base_url=gateway_url, timeout=120) as client:
        items = [
            {"id": "tower", "spec": "tcr_agent", "response": TOWER, "ground_truth": "7",
             "response_length": 18432},
            {"id": "overflow", "spec": "overflow", "response": "\\boxed{7}", "ground_truth": "7"},
        ]  # fmt: skip
        scored = client.post("/v1/score", json={"items": items})
        assert scored.status_code == 200, scored.text
        tower, overflow = scored.json()["results"]
        penalty = (20480 - 4096 - 18432) / 4096
        # Only the math component took undecided_reward (0: wrong); the penalty still applies.
        assert tower["reward"] == pytest.approx(-1.0 + penalty)
        assert tower["details"]["undecided"] == ["correct"]
        assert overflow["reward"] == 0.0 and overflow["details"]["undecided"] == ["formula"]

        for spec in ("tcr_agent", "overflow"):
            body = {"query": [PROMPT + TOWER], "prompts": [PROMPT], "labels": ["7"]}
            answer = client.post(f"/get_reward/{spec}", json=body)
            assert answer.status_code == 200, answer.text
            assert answer.json()["extra_logs"]["undecided"] == [1.0]
            slime = client.post(
                f"/slime/{spec}", json={"prompt": "q", "response": TOWER, "label": "7"}
            )
            assert slime.status_code == 200, slime.text


def test_a_label_sent_as_a_json_number_keeps_its_value(gateway_url: str) -> None:
    with httpx.Client(base_url=gateway_url, timeout=120) as client:
        for response, reward in (("\\boxed{0.0000001}", 1.0), ("\\boxed{0}", 0.0)):
            body = {"query": [PROMPT + response], "prompts": [PROMPT], "labels": [1e-07]}
            answer = client.post("/get_reward/rloo_math", json=body)
            assert answer.status_code == 200, answer.text
            assert answer.json()["rewards"] == [reward]
            slime = client.post(
                "/slime/rloo_math", json={"prompt": "q", "response": response, "label": 1e-07}
            )
            assert slime.status_code == 200 and slime.json() == reward, slime.text
