"""What a policy could write to be paid by a reward spec without earning it (issue 28), and
the honest rollout beside each hack.

``red_team.jsonl`` holds, per class (at least five cases each, on different golds):

- ``turns``: tool calls the policy typed but no tool answered (``tcr_agent`` without
  ``num_turns``, as on OpenRLHF's route). The hack earns a plain wrong answer's -1; the same
  wrong answer after calls a tool answered earns more.
- ``prompt``: ``/get_reward`` queries whose prompt is padded, spaced or missing, answered
  "I do not know." with the question's own number in the prompt. The hack is refused by name
  or earns 0; the honest answer earns 1.
- ``renormalize``: a spec with ``on_error: renormalize`` whose hard component fails on the
  response (a power tower's timeout, ...). The hack is an item error, never the easy
  component scaled up to the whole reward.
- ``totality``: numbers from the rollout and formulas outside their range. The hack is an
  item error naming its field; the honest item beside it in the same batch is scored.
- ``overlong``: a long response without ``response_length``. The hack's penalty is measured
  on the response itself.

The math verifier runs in this process (``tribunal.math.verify_answer``: the real one),
except where a case names the error the math service answers (``math_error``: its deadline
and its pool are tested in tests/math and tests/core), which stands in for it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tribunal.gateway import GatewayVerifier, load_spec_text, shipped_specs
from tribunal.gateway.builtins import estimate_tokens, num_turns
from tribunal.gateway.openrlhf import GetRewardRequest, failed_reward, to_items, to_response
from tribunal.math import MathConfig, verify_answer
from tribunal.wire.envelope import ItemError, ItemOutcome, ItemResult, VerifierInfo
from tribunal.wire.errors import ERRORS_BY_CODE, BadInput, TribunalError

CASES = [
    json.loads(line) for line in (Path(__file__).parent / "red_team.jsonl").read_text().splitlines()
]


class MathHere:
    """The math verifier in this process; a response in ``errors`` gets that error class
    (what the math service answers for it)."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors

    async def score(self, verifier: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        assert verifier == "math"
        results = []
        for item in items:
            reward, error = None, None
            code = self.errors.get(item["response"])
            if code is not None:
                error = ItemError.from_exception(ERRORS_BY_CODE[code](f"{code} (stand-in)"))
            else:
                try:
                    config = MathConfig().merged(**(item.get("options") or {}))
                    reward = verify_answer(item["response"], item["ground_truth"], config).reward
                except TribunalError as exc:
                    error = ItemError.from_exception(exc)
            info = VerifierInfo(name="math", version="3", config_hash="0" * 16)
            results.append(
                ItemResult(id=item["id"], reward=reward, error=error, verifier=info).model_dump(
                    mode="json"
                )
            )
        return results

    async def aclose(self) -> None:
        pass


def _gateway(extra_spec: str | None, errors: dict[str, str] | None = None) -> GatewayVerifier:
    specs = shipped_specs()
    if extra_spec:
        loaded = load_spec_text(extra_spec)
        specs[loaded.name] = loaded
    client = MathHere(errors or {})
    return GatewayVerifier(specs, lambda: client)


def _rollout(fields: dict[str, Any]) -> dict[str, Any]:
    response = fields["response"]
    if isinstance(response, dict):  # {"repeat", "times", "then"}: a long response, short file
        response = response["repeat"] * response["times"] + response["then"]
    return {**fields, "response": response}


async def _score(case: dict[str, Any], *rollouts: dict[str, Any]) -> list[ItemOutcome]:
    errors = {r["response"]: r["math_error"] for r in rollouts if "math_error" in r}
    verifier = _gateway(case.get("extra_spec"), errors)
    fields = [{k: v for k, v in _rollout(r).items() if k != "math_error"} for r in rollouts]
    items = [
        verifier.item_model.model_validate({"id": f"r{i}", "spec": case["spec"], **f})
        for i, f in enumerate(fields)
    ]
    return await verifier.score(items)


def _of(kind: str) -> list[Any]:
    return [pytest.param(c, id=f"{kind}:{c['note'][:40]}") for c in CASES if c["class"] == kind]


def test_five_cases_per_class() -> None:
    assert Counter(case["class"] for case in CASES) == {
        "turns": 5,
        "prompt": 5,
        "renormalize": 5,
        "totality": 6,
        "overlong": 5,
    }


@pytest.mark.parametrize("case", _of("turns"))
async def test_typed_tool_calls_earn_no_turns(case: dict[str, Any]) -> None:
    hack, honest = await _score(case, case["hack"], case["honest"])
    assert hack.reward == pytest.approx(-1.0)  # a wrong answer without a tool call
    assert honest.reward == pytest.approx(-0.8)  # the same, after two answered calls
    turns = hack.details["sub_rewards"]["num_turns"]["details"]
    assert turns["source"] == "unknown" and turns["tool_calls"] == 0
    assert turns["typed_tool_calls"] >= 0


@pytest.mark.parametrize("case", _of("prompt"))
async def test_the_prompt_never_pays_the_response(case: dict[str, Any]) -> None:
    def request(fields: dict[str, Any]) -> GetRewardRequest:
        prompts = None if fields["prompt"] is None else [fields["prompt"]]
        return GetRewardRequest(query=[fields["query"]], prompts=prompts, labels=[fields["label"]])

    async def reward(fields: dict[str, Any]) -> float | None:
        try:
            [item] = to_items(request(fields), case["spec"])
        except BadInput as exc:
            assert exc.field == "prompts"
            return None
        verifier = _gateway(None)
        loaded = verifier.specs[case["spec"]]
        if isinstance(item, BadInput):  # the query does not hold its prompt: failed alone
            assert item.field == "query.0"
            result: ItemResult | BadInput = item
        else:
            outcomes = await verifier.score([verifier.item_model.model_validate(item)])
            result = ItemResult(id="0", **outcomes[0].model_dump())
        components = list(loaded.spec.components)
        answer = to_response([result], components, failed_reward(loaded.spec), loaded.score)
        return answer.rewards[0]

    hack, honest = await reward(case["hack"]), await reward(case["honest"])
    assert honest == 1.0
    assert hack is None or hack == 0.0


@pytest.mark.parametrize("case", _of("renormalize"))
async def test_renormalize_never_pays_a_failure_the_response_caused(case: dict[str, Any]) -> None:
    hack, honest = await _score(case, case["hack"], case["honest"])
    assert honest.reward == pytest.approx(1.0)
    assert hack.reward is None and hack.error is not None
    assert hack.error.code == case["hack"]["math_error"]
    assert hack.details["dropped"] == []


@pytest.mark.parametrize("case", _of("totality"))
async def test_out_of_range_numbers_are_an_item_error_never_a_batch_error(
    case: dict[str, Any],
) -> None:
    hack, honest = await _score(case, case["hack"], case["honest"])
    assert hack.reward is None and hack.error is not None
    assert hack.error.code in ("bad_input", "configuration_error"), hack.error
    assert not hack.error.retryable
    assert honest.error is None and honest.reward is not None and honest.reward >= 1.0 - 1e-9


@pytest.mark.parametrize("case", _of("overlong"))
async def test_the_overlong_penalty_measures_the_response(case: dict[str, Any]) -> None:
    hack, honest = await _score(case, case["hack"], case["honest"])
    overlong = hack.details["sub_rewards"]["overlong"]
    assert overlong["details"]["source"] == "estimate"
    assert overlong["details"]["response_length"] == estimate_tokens(
        _rollout(case["hack"])["response"]
    )
    assert honest.reward == pytest.approx(1.0)
    assert hack.reward is not None and hack.reward < honest.reward


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "response",
    ["<tool_call>" * 200_000, "</tool_call>" * 200_000, "<tool_call>x" * 200_000 + "</tool_call>"],
    ids=["unclosed", "closers", "one-long-call"],
)
def test_counting_turns_is_linear(response: str) -> None:
    # A guard, not a timing: ``<tool_call>.*?</tool_call>`` rescanned the rest of the text
    # from each unclosed tag (38 s for 20,000 of them, in the gateway's event loop).
    reward, details = num_turns({"response": response}, {})
    assert reward == 2.0 and details["source"] == "unknown"
    assert details["typed_tool_calls"] == (1 if response.startswith("<tool_call>x") else 0)


def test_the_estimate_never_under_counts_digit_dense_text() -> None:
    # Issue 36: bytes / 4 counted "1234" * n as n tokens where a digit-per-token vocabulary
    # (Qwen's) has 4 n.
    digits = "1234" * 5_000
    assert estimate_tokens(digits) == len(digits)
    assert estimate_tokens("word " * 800) == 1_000


def test_other_families_turn_markers_are_not_turns() -> None:
    call = "<tool_call>{}</tool_call>"
    typed = call + "<|eot_id|><|start_header_id|>tool<|end_header_id|><tool_response>4"
    chatml = call + "<|im_end|>\n<|im_start|>user\n<tool_response>4"
    assert num_turns({"response": typed}, {})[0] == 2.0  # a ChatML policy typed them
    assert num_turns({"response": typed}, {"template": "llama3"})[0] == 4.0
    assert num_turns({"response": chatml}, {})[0] == 4.0
