"""Reward specs: each shipped recipe recomputed by hand, error policies, gates, NaN.

The verifiers are stood in for by a scripted in-process client (hand-made component
results, as the arithmetic needs); the real services are exercised in
tests/e2e/test_gateway_service.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, get_args

import pytest

from tests.documents import assert_documented
from tribunal.gateway import GatewayVerifier, SpecError, load_spec_text, shipped_specs
from tribunal.gateway.builtins import overlong_penalty
from tribunal.gateway.settings import GatewaySettings
from tribunal.wire.envelope import ItemError, ItemOutcome, ItemResult, VerifierInfo
from tribunal.wire.errors import BackendUnavailable, BadInput
from tribunal.wire.gateway import ComponentStatus, SpecDetails, SubReward

Answer = Callable[[dict[str, Any]], tuple[float | None, ItemError | None]]


class ScriptedClient:
    """Answers each verifier with a function of the item; records every request."""

    def __init__(
        self,
        answers: dict[str, Answer],
        down: set[str] | None = None,
        refuse: set[str] | None = None,
    ) -> None:
        self.answers = answers
        self.down = down or set()
        self.refuse = refuse or set()
        self.requests: list[tuple[str, list[dict[str, Any]]]] = []

    async def score(self, verifier: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        self.requests.append((verifier, list(items)))
        if verifier in self.down:
            raise BackendUnavailable(f"{verifier} is down")
        if verifier in self.refuse:
            # What a verifier of a release before issue 36 did when no item of a batch was
            # valid: 422, the first error.
            raise BadInput("items.0.ground_truth: Field required", field="items.0.ground_truth")
        results = []
        for item in items:
            reward, error = self.answers[verifier](item)
            results.append(
                ItemResult(
                    id=item["id"],
                    reward=reward,
                    error=error,
                    details={"seen": sorted(item)},
                    verifier=VerifierInfo(name=verifier, version="1", config_hash="0" * 16),
                ).model_dump(mode="json")
            )
        return results

    async def aclose(self) -> None:
        pass


def const(reward: float) -> Answer:
    return lambda item: (reward, None)


def timed_out(item: dict[str, Any]) -> tuple[float | None, ItemError | None]:
    """A math verifier that cannot decide the answer in time (a power tower)."""
    return None, ItemError(code="timeout", message="over the deadline", retryable=True)


def gateway(client: ScriptedClient, extra_spec: str | None = None) -> GatewayVerifier:
    specs = shipped_specs()
    if extra_spec:
        loaded = load_spec_text(extra_spec)
        specs[loaded.name] = loaded
    return GatewayVerifier(specs, lambda: client)


async def score_one(verifier: GatewayVerifier, **fields: Any) -> ItemOutcome:
    item = verifier.item_model.model_validate({"id": "r1", **fields})
    [outcome] = await verifier.score([item])
    return outcome


REFINER = {
    "question": "What is the dosage?",
    "response": "<answer><snippet id=a1>Take 5 mg.</snippet></answer>",
    "positive_rubrics": ["states the dosage"],
    "negative_rubrics": ["invents a study"],
    "evidence": {"a1": "The dosage is 5 mg."},
}


@pytest.mark.parametrize(
    ("spec", "citation_weight"), [("refiner_rubric_citation", 0.2), ("refiner_balanced", 0.5)]
)
async def test_refiner_recipes_by_hand(spec: str, citation_weight: float) -> None:
    client = ScriptedClient({"judge": const(0.75), "citation": const(0.4)})
    outcome = await score_one(gateway(client), spec=spec, **REFINER)
    assert outcome.error is None
    assert outcome.reward == pytest.approx(10 * 0.75 + citation_weight * 0.4)
    subs = outcome.details["sub_rewards"]
    assert subs["judge"]["reward"] == 0.75 and subs["judge"]["weight"] == 10
    assert subs["citation"]["reward"] == 0.4 and subs["citation"]["weight"] == citation_weight
    assert outcome.verifier is not None and outcome.verifier.name == f"spec:{spec}"
    assert outcome.details["spec"]["hash"] == outcome.verifier.config_hash
    # One request per verifier; the judge gets the item's own rubrics plus the static v3 set.
    by_verifier = dict(client.requests)
    assert set(by_verifier) == {"judge", "citation"}
    [judge_item] = by_verifier["judge"]
    assert judge_item["rubric_sets"] == ["v3"]
    assert judge_item["positive_rubrics"] == ["states the dosage"]
    assert judge_item["id"] == "r1/judge"
    [citation_item] = by_verifier["citation"]
    assert citation_item["evidence"] == {"a1": "The dosage is 5 mg."}
    assert "positive_rubrics" not in citation_item


async def test_spec_outcomes_are_tallied_for_metrics_by_spec_and_component() -> None:
    client = ScriptedClient({"judge": const(0.75), "citation": const(0.4)})
    verifier = gateway(client)
    await score_one(verifier, spec="refiner_rubric_citation", **REFINER)
    await score_one(verifier, spec="refiner_rubric_citation", **REFINER)
    client.down = {"citation"}
    failed = await score_one(verifier, spec="refiner_rubric_citation", **REFINER)
    assert failed.error is not None
    stats = verifier.take_stats()
    spec = "spec|refiner_rubric_citation|"
    reward = 10 * 0.75 + 0.2 * 0.4  # 7.58: in the bucket up to 10
    assert stats[f"{spec}reward"] == 2 and stats[f"{spec}rewards|count"] == 2
    assert stats[f"{spec}rewards|le|10.0"] == 2
    assert stats[f"{spec}rewards|sum"] == round(2 * reward * 1_000_000)
    assert stats[f"{spec}squares"] == 2 * round(reward * reward * 1_000_000)
    assert stats[f"{spec}component|judge|count"] == 2
    assert stats[f"{spec}component|citation|count"] == 2
    assert stats[f"{spec}component|citation|sum"] == round(2 * 0.4 * 1_000_000)
    assert stats[f"{spec}error"] == 1
    assert stats[f"{spec}error|{failed.error.code}"] == 1
    # Taken once: the next take starts from none.
    assert verifier.take_stats() == {}


async def test_a_huge_reward_is_clipped_in_the_tallies_never_in_the_answer() -> None:
    # The formula pays 1e15: squared in millionths it would overflow Redis's 64-bit
    # counter, and the worker's write of results with it.
    client = ScriptedClient({"judge": const(1.0), "citation": const(1e-15)})
    verifier = gateway(client, HUGE_FORMULA)
    outcome = await score_one(verifier, spec="ratio", **REFINER)
    assert outcome.reward == pytest.approx(1e15)
    stats = verifier.take_stats()
    assert stats["spec|ratio|squares"] == 1000**2 * 1_000_000 < 2**63
    assert stats["spec|ratio|rewards|sum"] == 1000 * 1_000_000
    assert stats["spec|ratio|rewards|le|+Inf"] == 1


async def test_static_sets_can_be_dropped() -> None:
    client = ScriptedClient({"judge": const(1.0), "citation": const(1.0)})
    outcome = await score_one(gateway(client), spec="refiner_instance_rubrics", **REFINER)
    assert outcome.reward == pytest.approx(10.2)
    assert dict(client.requests)["judge"][0]["rubric_sets"] == []
    # Per rollout, with the default recipe: `rubric_sets: []` overrides the default [v3].
    client = ScriptedClient({"judge": const(1.0), "citation": const(1.0)})
    await score_one(gateway(client), spec="refiner_rubric_citation", rubric_sets=[], **REFINER)
    assert dict(client.requests)["judge"][0]["rubric_sets"] == []


def tool_calls(n: int) -> str:
    """``n`` Hermes calls, each answered by the tool in a turn of its own (ChatML)."""
    call = '<tool_call>{"name": "python", "arguments": {"code": "1+1"}}</tool_call>'
    answered = call + "<|im_end|>\n<|im_start|>user\n<tool_response>2</tool_response><|im_end|>"
    return "Let me compute.\n" + "\n<|im_start|>assistant\n".join([answered] * n)


@pytest.mark.parametrize(
    ("correct", "fields", "expected"),
    [
        (1.0, {"num_turns": 8}, 1.0),  # right: +1 whatever the turns
        (0.0, {"num_turns": 2}, -1.0),  # wrong, no tool call: -1
        (0.0, {"num_turns": 6}, -0.8),  # wrong after 2 tool calls: -1 + 0.05 * 4
        (0.0, {"num_turns": 12}, -0.6),  # capped at -0.6: min(-0.6, -0.5)
        (0.0, {"num_turns": 0}, -1.1),  # verl's num_turns=0 (DemyAgent's "original")
        (0.0, {"response_extra": 3}, -0.7),  # 3 answered <tool_call> blocks: 2 + 6 turns
    ],
)
async def test_tcr_agent_by_hand(correct: float, fields: dict[str, Any], expected: float) -> None:
    client = ScriptedClient({"math": const(correct)})
    calls = fields.pop("response_extra", 0)
    outcome = await score_one(
        gateway(client),
        spec="tcr_agent",
        response=tool_calls(calls) + "\nSo \\boxed{4}",
        ground_truth="4",
        **fields,
    )
    outcome_sign = 2 * correct - 1
    turns = fields.get("num_turns", 2 + 2 * calls)
    by_hand = 1.0 if correct else min(-0.6, outcome_sign + 0.05 * (turns - 2))
    assert by_hand == pytest.approx(expected)
    assert outcome.reward == pytest.approx(expected)
    overlong = outcome.details["sub_rewards"]["overlong"]
    assert (overlong["reward"], overlong["details"]["source"]) == (0.0, "estimate")
    assert outcome.details["sub_rewards"]["num_turns"]["reward"] == turns


async def test_tcr_agent_coding_row_goes_to_code_with_the_last_code_block() -> None:
    client = ScriptedClient({"code": const(0.0)})
    response = "First try:\n```python\nprint(1)\n```\nFixed:\n```python\nprint(input())\n```"
    tests = {"kind": "stdio", "cases": [{"stdin": "3\n", "stdout": "3\n"}]}
    outcome = await score_one(
        gateway(client), spec="tcr_agent", response=response, tests=tests, num_turns=4
    )
    assert outcome.reward == pytest.approx(min(-0.6, -1 + 0.05 * 2))
    [(verifier, [item])] = client.requests
    assert verifier == "code"
    assert item["code"] == "print(input())\n"
    assert item["language"] == "python"
    assert item["options"] == {"all_or_nothing": True}


@pytest.mark.parametrize(
    ("length", "expected_penalty"),
    [(16384, 0.0), (16385, -1 / 4096), (18432, -0.5), (20480, -1.0), (30000, -1.0)],
)
async def test_tcr_agent_overlong_penalty_by_hand(length: int, expected_penalty: float) -> None:
    # DAPO Eq. 13 with L_max = 20480, L_cache = 4096: 0 up to 16384, linear to -1 at 20480.
    assert overlong_penalty({"response_length": length}, {"max_length": 20480, "buffer": 4096}) == (
        pytest.approx(expected_penalty),
        {"response_length": length, "source": "field", "max_length": 20480, "buffer": 4096},
    )
    client = ScriptedClient({"math": const(1.0)})
    outcome = await score_one(
        gateway(client),
        spec="tcr_agent",
        response="\\boxed{4}",
        ground_truth="4",
        response_length=length,
    )
    assert outcome.reward == pytest.approx(1.0 + expected_penalty)


@pytest.mark.parametrize(("correct", "expected"), [(1.0, 1.0), (0.0, 0.0)])
async def test_rloo_math_by_hand(correct: float, expected: float) -> None:
    client = ScriptedClient({"math": const(correct)})
    outcome = await score_one(gateway(client), spec="rloo_math", response="7", ground_truth="7")
    assert outcome.reward == expected
    assert dict(client.requests)["math"] == [
        {
            "id": "r1/math",
            "response": "7",
            "ground_truth": "7",
            "options": {"answer_format": "marked"},
        }
    ]


async def test_component_error_fails_the_item_by_default() -> None:
    client = ScriptedClient({"judge": const(0.75)}, down={"citation"})
    outcome = await score_one(gateway(client), spec="refiner_rubric_citation", **REFINER)
    assert outcome.reward is None
    assert outcome.error is not None
    assert outcome.error.code == "backend_unavailable" and outcome.error.retryable
    assert "citation" in outcome.error.message
    subs = outcome.details["sub_rewards"]
    assert subs["judge"]["reward"] == 0.75  # kept for debugging, not turned into a reward
    assert subs["citation"]["status"] == "error"


def bad_label(item: dict[str, Any]) -> tuple[float | None, ItemError | None]:
    """A math verifier refusing the item's ground truth."""
    return None, ItemError(code="bad_input", message="empty", retryable=False, field="ground_truth")


NO_FAILED_REWARD = """
name: math_plain
version: "1"
components:
  math:
    verifier: math
    inputs: {response: response, ground_truth: ground_truth}
"""


async def test_a_failed_items_result_reports_the_reward_its_spec_pays_for_it() -> None:
    # What OpenRLHF's and slime's routes pay (failed_reward, else undecided_reward), in the
    # result of every route: verl's compute_score reads it, having no missing value.
    failing = ScriptedClient({"math": bad_label, "judge": bad_label, "code": bad_label})
    outcome = await score_one(gateway(failing), spec="rloo_math", response="7", ground_truth="")
    assert outcome.error is not None and outcome.error.code == "bad_input"
    assert outcome.reward is None  # still an error, never a reward, on this route
    assert outcome.details["failed_reward"] == 0.0  # rloo_math: its undecided_reward
    tcr = await score_one(gateway(failing), spec="tcr_agent", response="7", ground_truth="7")
    assert tcr.error is not None and tcr.details["failed_reward"] == -2.1  # its failed_reward
    # The infrastructure's errors are retried, not paid; a spec with neither value pays none.
    down = ScriptedClient({}, down={"math"})
    outage = await score_one(gateway(down), spec="rloo_math", response="7", ground_truth="7")
    assert outage.error is not None and outage.error.code == "backend_unavailable"
    assert outage.details["failed_reward"] is None
    plain = gateway(failing, NO_FAILED_REWARD)
    neither = await score_one(plain, spec="math_plain", response="7", ground_truth="")
    assert neither.error is not None and neither.details["failed_reward"] is None
    # A scored item carries none.
    paid = await score_one(
        gateway(ScriptedClient({"math": const(1.0)})),
        spec="rloo_math",
        response="7",
        ground_truth="7",
    )
    assert paid.reward == 1.0 and paid.details["failed_reward"] is None


RENORMALIZE = """
name: refiner_renorm
version: "1"
components:
  judge:
    weight: 10
    verifier: judge
    inputs: {question: question, response: response, positive_rubrics: positive_rubrics}
  citation:
    weight: 0.2
    verifier: citation
    inputs: {response: response, evidence: evidence}
on_error: renormalize
"""


async def test_component_error_renormalizes_when_the_spec_says_so() -> None:
    client = ScriptedClient({"judge": const(0.75)}, down={"citation"})
    outcome = await score_one(gateway(client, RENORMALIZE), spec="refiner_renorm", **REFINER)
    assert outcome.error is None
    # Citation dropped: the judge's weight is scaled to the whole 10.2.
    assert outcome.reward == pytest.approx(0.75 * 10 * (10.2 / 10))
    assert outcome.details["dropped"] == ["citation"]
    assert outcome.details["weight_scale"] == pytest.approx(1.02)
    assert outcome.details["sub_rewards"]["citation"]["status"] == "dropped"
    # Every component failing is still an error.
    client = ScriptedClient({}, down={"citation", "judge"})
    outcome = await score_one(gateway(client, RENORMALIZE), spec="refiner_renorm", **REFINER)
    assert outcome.reward is None and outcome.error is not None


GATED = """
name: gated_judge
version: "1"
components:
  format:
    builtin: contains
    params: {all_of: ["<answer>", "</answer>"]}
    gate: {threshold: 1, reward: -1}
  judge:
    verifier: judge
    inputs: {question: question, response: response, positive_rubrics: positive_rubrics}
"""


async def test_a_closed_gate_decides_the_reward_and_saves_the_calls() -> None:
    client = ScriptedClient({"judge": const(0.5)})
    verifier = gateway(client, GATED)
    outcome = await score_one(verifier, spec="gated_judge", **{**REFINER, "response": "no tags"})
    assert outcome.reward == -1.0
    assert outcome.details["closed_gate"] == "format"
    assert outcome.details["sub_rewards"]["judge"]["status"] == "skipped"
    assert client.requests == []  # the judge was never asked
    outcome = await score_one(verifier, spec="gated_judge", **REFINER)
    assert outcome.reward == 0.5
    assert [v for v, _ in client.requests] == ["judge"]


NAN_FORMULA = """
name: ratio
version: "1"
components:
  judge:
    verifier: judge
    inputs: {question: question, response: response, positive_rubrics: positive_rubrics}
  citation: {verifier: citation, inputs: {response: response}}
formula: "judge * 1e308 * (10 - 9 * citation)"
"""
# A division by a component is refused at load (issue 36): these overflow instead.
HUGE_FORMULA = NAN_FORMULA.replace(
    "judge * 1e308 * (10 - 9 * citation)", "1e15 * judge * (1 - citation)"
)


@pytest.mark.parametrize(
    ("judge", "citation", "code"),
    [
        (1.0, 0.0, "configuration_error"),
        (float("nan"), 1.0, "internal_error"),
        (float("inf"), 1.0, "internal_error"),
    ],
)
async def test_non_finite_values_are_errors_never_rewards(
    judge: float, citation: float, code: str
) -> None:
    client = ScriptedClient({"judge": const(judge), "citation": const(citation)})
    outcome = await score_one(gateway(client, NAN_FORMULA), spec="ratio", **REFINER)
    assert outcome.reward is None
    assert outcome.error is not None and outcome.error.code == code


async def test_an_undecided_component_takes_undecided_reward_and_the_others_still_apply() -> None:
    # Issue 36: a wrong, overlong answer ending in what sympy cannot finish was paid -1 (the
    # undecided reward as the item's) and escaped the overlong penalty.
    client = ScriptedClient({"math": timed_out})
    outcome = await score_one(
        gateway(client),
        spec="tcr_agent",
        response="\\boxed{2^{2^{2^{99}}}}",
        ground_truth="4",
        response_length=18432,
    )
    penalty = (20480 - 4096 - 18432) / 4096
    assert outcome.reward == pytest.approx(-1.0 + penalty)
    assert outcome.details["undecided"] == ["correct"]
    assert outcome.details["sub_rewards"]["correct"]["status"] == "undecided"
    assert outcome.details["sub_rewards"]["overlong"]["reward"] == pytest.approx(penalty)


async def test_an_undefined_formula_is_the_undecided_reward_not_an_error() -> None:
    spec = NAN_FORMULA + "undecided_reward: 0.0\n"
    client = ScriptedClient({"judge": const(1.0), "citation": const(0.0)})
    outcome = await score_one(gateway(client, spec), spec="ratio", **REFINER)
    assert outcome.error is None and outcome.reward == 0.0
    assert outcome.details["undecided"] == ["formula"]


async def test_direct_items_pass_through_in_order() -> None:
    client = ScriptedClient(
        {
            "math": lambda item: (float(item["response"] == item["ground_truth"]), None),
            "judge": const(0.5),
        }
    )
    verifier = gateway(client)
    items = [
        verifier.item_model.model_validate(raw)
        for raw in [
            {"id": "a", "verifier": "math", "response": "1", "ground_truth": "1"},
            {
                "id": "b",
                "verifier": "judge",
                "question": "q",
                "response": "r",
                "rubric_sets": ["v3"],
            },
            {"id": "c", "verifier": "math", "response": "2", "ground_truth": "1"},
            {"id": "d", "spec": "rloo_math", "response": "1", "ground_truth": "1"},
        ]
    ]
    outcomes = await verifier.score(items)
    assert [o.reward for o in outcomes] == [1.0, 0.5, 0.0, 1.0]
    assert [o.verifier.name for o in outcomes if o.verifier] == [
        "math",
        "judge",
        "math",
        "spec:rloo_math",
    ]
    math_items = [items for v, items in client.requests if v == "math"]
    assert len(math_items) == 1 and [i["id"] for i in math_items[0]] == ["a", "c", "d/math"]


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({"id": "x"}, "exactly one of `verifier` and `spec`"),
        ({"id": "x", "verifier": "math", "spec": "rloo_math"}, "exactly one"),
        ({"id": "x", "spec": "nope"}, "unknown spec 'nope'"),
        ({"id": "x", "verifier": "poetry"}, "verifier: one of"),
    ],
)
def test_bad_items_name_the_field(raw: dict[str, Any], needle: str) -> None:
    verifier = gateway(ScriptedClient({}))
    with pytest.raises(ValueError) as caught:
        verifier.item_model.model_validate(raw)
    assert needle in str(caught.value)


HEAD = "name: x\nversion: '1'\n"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("name: x\nversion: '1'\ncomponents: {a: {verifier: math}}\nformula: a.real", "Attribute"),
        (
            "name: x\nversion: '1'\ncomponents: {a: {verifier: poetry}}",
            "components.a.one_of.0.verifier",
        ),
        (
            "name: x\nversion: '1'\ncomponents: {a: {verifier: math, weight: 2}}\ncombine: min",
            "ignores weights",
        ),
        (
            HEAD + "components: {a: {verifier: math}}\nformula: a\non_error: renormalize",
            "renormalize",
        ),
        ("name: x\nversion: '1'\ncomponents: {min: {verifier: math}}", "not a function"),
        (
            HEAD + "components: {a: {builtin: overlong_penalty, params: {max_length: 10}}}",
            "missing ['buffer']",
        ),
        ("name: X!\nversion: '1'\ncomponents: {a: {verifier: math}}", "name"),
        ("- a list", "a mapping"),
    ],
)
def test_malformed_specs_are_refused_at_load(text: str, needle: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec_text(text)
    assert needle in str(caught.value)


def test_the_hash_moves_with_the_rule_not_the_prose() -> None:
    base = (
        "name: x\nversion: '1'\ncomponents: {a: {verifier: math, weight: 2}, b: {verifier: math}}\n"
    )
    h = load_spec_text(base).hash
    assert load_spec_text(base + "description: other words\n").hash == h
    assert load_spec_text(base.replace("weight: 2", "weight: 3")).hash != h


async def test_synchronous_results_pass_a_verifier_result_on_as_it_came() -> None:
    def math(item: dict[str, Any]) -> tuple[float | None, ItemError | None]:
        if "ground_truth" in item:
            return float(item["response"] == item["ground_truth"]), None
        error = ItemError(
            code="bad_input",
            message="items.1.ground_truth: Field required",
            retryable=False,
            field="items.1.ground_truth",
        )
        return None, error

    client = ScriptedClient({"math": math})
    verifier = gateway(client)
    items = [
        verifier.item_model.model_validate(raw)
        for raw in [
            {"id": "a", "verifier": "math", "response": "1", "ground_truth": "1"},
            {"id": "b", "verifier": "math", "response": "1"},
            {"id": "c", "spec": "rloo_math", "response": "1", "ground_truth": "1"},
        ]
    ]
    info = VerifierInfo(name="gateway", version="1", config_hash="0" * 16)
    texts = await verifier.score_results(items, info)
    a, b, c = (ItemResult.model_validate_json(text) for text in texts)
    [answered] = await client.score("math", [items[0].fields()])
    assert json.loads(texts[0]) == answered  # passed on as the verifier wrote it
    assert a.reward == 1.0 and a.verifier.name == "math"
    assert b.reward is None and b.error is not None
    assert b.error.field == "ground_truth"  # rebased: the gateway's request's index is gone
    assert b.error.message == "ground_truth: Field required"
    assert c.reward == 1.0 and c.verifier.name == "spec:rloo_math"
    outcomes = await verifier.score(items)
    assert [o.reward for o in outcomes] == [a.reward, b.reward, c.reward]


async def test_a_malformed_verifier_result_is_an_item_error() -> None:
    class Malformed(ScriptedClient):
        async def score(
            self, verifier: str, items: Sequence[dict[str, Any]]
        ) -> list[dict[str, Any]]:
            return [{"id": item["id"], "reward": "lots"} for item in items]

    verifier = gateway(Malformed({}))
    item = verifier.item_model.model_validate(
        {"id": "a", "verifier": "math", "response": "1", "ground_truth": "1"}
    )
    [text] = await verifier.score_results(
        [item], VerifierInfo(name="g", version="1", config_hash="0")
    )
    result = ItemResult.model_validate_json(text)
    assert result.reward is None and result.error is not None
    assert result.error.code == "internal_error" and "malformed" in result.error.message


async def test_a_verifier_result_holding_an_integer_past_64_bits_is_passed_on_exactly() -> None:
    class BigDetails(ScriptedClient):
        async def score(
            self, verifier: str, items: Sequence[dict[str, Any]]
        ) -> list[dict[str, Any]]:
            results = await super().score(verifier, items)
            return [{**r, "details": {"n": 2**70}} for r in results]

    verifier = gateway(BigDetails({"math": const(1.0)}))
    item = verifier.item_model.model_validate(
        {"id": "a", "verifier": "math", "response": "1", "ground_truth": "1"}
    )
    [text] = await verifier.score_results(
        [item], VerifierInfo(name="g", version="1", config_hash="0")
    )
    result = json.loads(text)
    assert result["reward"] == 1.0 and result["details"] == {"n": 2**70}


async def test_a_batch_refused_whole_gives_each_item_its_own_reason() -> None:
    verifier = gateway(ScriptedClient({}, refuse={"math"}))
    items = [
        verifier.item_model.model_validate(raw)
        for raw in [
            {"id": "a", "verifier": "math", "response": "1"},
            {"id": "b", "verifier": "math", "ground_truth": "1"},
        ]
    ]
    first, second = await verifier.score(items)
    assert first.error is not None and first.error.field == "ground_truth"
    assert second.error is not None and second.error.field == "response"
    assert first.error.code == second.error.code == "bad_input"


def test_specs_from_a_directory_beside_the_shipped_ones(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(GATED)
    specs = GatewaySettings(
        queue="memory", gateway={"specs_dir": str(tmp_path)}
    ).gateway.load_specs()
    assert {"gated_judge", "rloo_math", "tcr_agent"} <= set(specs)
    assert specs["gated_judge"].origin == str(tmp_path / "mine.yaml")
    (tmp_path / "again.yaml").write_text(GATED)
    with pytest.raises(SpecError, match="already defined"):
        GatewaySettings(queue="memory", gateway={"specs_dir": str(tmp_path)}).gateway.load_specs()
    with pytest.raises(SpecError, match="no such directory"):
        GatewaySettings(
            queue="memory", gateway={"specs_dir": str(tmp_path / "nope")}
        ).gateway.load_specs()


DROPPED = RENORMALIZE.replace("name: refiner_renorm", "name: dropped")
DEFAULTED = """
name: defaulted
version: "1"
components:
  math: {verifier: math, inputs: {response: response, ground_truth: ground_truth}}
  style: {when: style_notes, builtin: contains, params: {all_of: ["QED"]}, default: 0}
"""


def scenarios() -> list[tuple[str | None, ScriptedClient, dict[str, Any]]]:
    """Spec items that reach every component status, a closed gate, a dropped component,
    a failed item, built-ins and defaults; and a verifier item whose verifier is down."""
    return [
        (None, ScriptedClient({"judge": const(0.75), "citation": const(0.4)}), {
            "spec": "refiner_rubric_citation", **REFINER
        }),
        (None, ScriptedClient({"judge": const(0.75)}, down={"citation"}), {
            "spec": "refiner_rubric_citation", **REFINER
        }),
        (DROPPED, ScriptedClient({"judge": const(0.75)}, down={"citation"}), {
            "spec": "dropped", **REFINER
        }),
        (GATED, ScriptedClient({"judge": const(0.5)}), {
            "spec": "gated_judge", **{**REFINER, "response": "no tags"}
        }),
        (NAN_FORMULA, ScriptedClient({"judge": const(1.0), "citation": const(0.0)}), {
            "spec": "ratio", **REFINER
        }),
        (None, ScriptedClient({"math": const(0.0)}), {
            "spec": "tcr_agent", "response": tool_calls(2) + "\\boxed{4}", "ground_truth": "4"
        }),
        (None, ScriptedClient({"math": const(1.0)}), {
            "spec": "tcr_agent", "response": "\\boxed{4}", "ground_truth": "4",
            "response_length": 18432, "num_turns": 4,
        }),
        (None, ScriptedClient({"math": timed_out}), {
            "spec": "tcr_agent", "response": "\\boxed{2^{2^{2^{99}}}}", "ground_truth": "4",
            "response_length": 18432,
        }),
        (DEFAULTED, ScriptedClient({"math": const(1.0)}), {
            "spec": "defaulted", "response": "\\boxed{4}", "ground_truth": "4"
        }),
        (None, ScriptedClient({}, down={"math"}), {
            "verifier": "math", "response": "1", "ground_truth": "1"
        }),
    ]  # fmt: skip


async def test_results_are_what_the_gateway_document_says() -> None:
    info = VerifierInfo(name="gateway", version="1", config_hash="0" * 16)
    seen: dict[str, set[Any]] = {"status": set(), "closed_gate": set(), "dropped": set()}
    for extra, client, fields in scenarios():
        verifier = gateway(client, extra)
        item = verifier.item_model.model_validate({"id": "r1", **fields})
        [text] = await verifier.score_results([item], info)
        result = json.loads(text)
        assert_documented("gateway", "GatewayItemResult", result)
        if "spec" not in fields:
            assert result["details"] == {} and result["error"] is not None
            continue
        details = SpecDetails.model_validate(result["details"])
        assert set(result["details"]) == set(SpecDetails.model_fields)
        assert list(details.sub_rewards) == list(verifier.specs[fields["spec"]].spec.components)
        for entry in result["details"]["sub_rewards"].values():
            assert set(entry) == set(SubReward.model_fields)
        seen["status"] |= {entry.status for entry in details.sub_rewards.values()}
        seen["closed_gate"].add(details.closed_gate)
        seen["dropped"] |= set(details.dropped)
    assert seen["status"] == set(get_args(ComponentStatus))
    assert seen["closed_gate"] == {None, "format"} and seen["dropped"] == {"citation"}


TOKENIZED = """
name: tokenized
version: "1"
components:
  overlong:
    builtin: overlong_penalty
    params: {max_length: 120, buffer: 100, tokenizer: TOKENIZER}
"""


async def test_the_overlong_penalty_counts_tokens_with_the_named_tokenizer(
    tmp_path: Path,
) -> None:
    # A byte-level BPE trained here (no download): the penalty measures the response in its
    # tokens when the rollout sends no response_length; a tokenizer that cannot load is an
    # item error naming it, never a reward.
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token=None))
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(["the answer is seven " * 20], trainer=trainer)
    transformers.PreTrainedTokenizerFast(tokenizer_object=bpe).save_pretrained(tmp_path / "tok")
    response = "the answer is seven " * 25
    tokens = len(transformers.AutoTokenizer.from_pretrained(tmp_path / "tok").encode(response))
    assert 20 < tokens < 120 < len(response.encode()) // 4  # the estimate would be -1
    verifier = gateway(ScriptedClient({}), TOKENIZED.replace("TOKENIZER", str(tmp_path / "tok")))
    outcome = await score_one(verifier, spec="tokenized", response=response)
    overlong = outcome.details["sub_rewards"]["overlong"]["details"]
    assert (overlong["source"], overlong["response_length"]) == ("tokenizer", tokens)
    assert outcome.reward == pytest.approx((20 - tokens) / 100)
    missing = TOKENIZED.replace("TOKENIZER", str(tmp_path / "nope")).replace("tokenized", "nope")
    outcome = await score_one(gateway(ScriptedClient({}), missing), spec="nope", response="hi")
    assert outcome.reward is None and outcome.error is not None
    assert outcome.error.code == "configuration_error" and "nope" in outcome.error.message
