"""OpenRLHF's body -> gateway items, and results -> OpenRLHF's answer (no HTTP here; the
route itself runs in tests/e2e/test_gateway_service.py)."""

from __future__ import annotations

import pytest

from tribunal.gateway.openrlhf import (
    MIN_TRUNCATED_PROMPT_CHARS,
    GetRewardRequest,
    failed_reward,
    locate_truncated_response,
    strip_end_tokens,
    to_items,
    to_response,
)
from tribunal.gateway.specs import shipped_specs
from tribunal.wire.envelope import ItemError, ItemResult, VerifierInfo
from tribunal.wire.errors import (
    BackendUnavailable,
    BadInput,
    ConfigurationError,
    InternalError,
    QueueFull,
    ScoringTimeout,
    TribunalError,
)

INFO = VerifierInfo(name="spec:rloo_math", version="1", config_hash="0" * 16)


def test_queries_become_rollouts() -> None:
    request = GetRewardRequest(
        query=["PROMPT A: \\boxed{4}", "PROMPT B: unrelated text", "P2 answer"],
        prompts=["PROMPT A: ", "PROMPT B: ", "P2"],
        labels=["4", '{"positive_rubrics": ["is short"], "ground_truth": "7"}', 12],
    )
    first, second, third = to_items(request, "rloo_math")
    assert first == {
        "id": "0",
        "spec": "rloo_math",
        "response": "\\boxed{4}",
        "question": "PROMPT A: ",
        "ground_truth": "4",
    }
    assert second["response"] == "unrelated text"
    assert second["positive_rubrics"] == ["is short"] and second["ground_truth"] == "7"
    assert third["response"] == " answer" and third["ground_truth"] == "12"


QUESTION = "<|im_start|>user\nTom has 12 apples and eats 5. How many are left?<|im_end|>\n"


@pytest.mark.parametrize(
    "query",
    [
        QUESTION + "<|im_start|>assistant\nI do not know.",
        "<|endoftext|><|endoftext|>" + QUESTION + "<|im_start|>assistant\nI do not know.",
        " "
        + QUESTION.replace("apples and", "apples  and")
        + "<|im_start|>assistant\nI do not know.",
        "<pad><pad>\n" + QUESTION.replace("\n", "\r\n") + "<|im_start|>assistant\nI do not know.",
        QUESTION + "<|im_start|>assistant\nI do not know.",
    ],
)
def test_the_prompt_is_found_as_the_trainer_builds_it(query: str) -> None:
    # Padding, whitespace and line ends around the prompt: the question's numbers never
    # reach the verifier as the response's.
    for prompt in (QUESTION, "<|endoftext|>" + QUESTION, QUESTION + " "):
        request = GetRewardRequest(query=[query], prompts=[prompt], labels=["7"])
        [item] = to_items(request, "rloo_math")
        assert item["response"].strip() == "<|im_start|>assistant\nI do not know."
        assert "12" not in item["response"] and "5" not in item["response"]


@pytest.mark.parametrize(
    "prompts",
    [
        ["What is 3 + 4?", "What is 1 + 1?"],
        ["What is 3 + 4?", "What is 2 + 2? Think."],
        ["What is 3 + 4?", "What is 2 + 2?!"],
        ["What is 3 + 4?", "Q: What is 2 + 2?"],
    ],
)
def test_a_query_whose_prompt_is_not_found_fails_alone_by_name(prompts: list[str]) -> None:
    request = GetRewardRequest(
        query=["What is 3 + 4? 7", "What is 2 + 2? I do not know."],
        prompts=prompts,
        labels=["7", "4"],
    )
    first, second = to_items(request, "rloo_math")
    assert isinstance(first, dict) and first["response"] == " 7"
    assert isinstance(second, BadInput) and second.field == "query.1"


def test_a_request_without_prompts_or_labels_is_refused_whole() -> None:
    for missing in ("prompts", "labels"):
        body = {"query": ["P: #### 7"], "prompts": ["P: "], "labels": ["7"], missing: None}
        with pytest.raises(BadInput) as refused:
            to_items(GetRewardRequest.model_validate(body), "rloo_math")
        assert refused.value.field == missing


def test_lengths_must_agree() -> None:
    with pytest.raises(ValueError, match="labels: 1 entries for 2 queries"):
        GetRewardRequest(query=["a", "b"], labels=["1"])


def result(
    reward: float | None, error: ItemError | None = None, undecided: bool = False, **subs: float
) -> ItemResult:
    details: dict[str, object] = {
        "sub_rewards": {name: {"reward": value} for name, value in subs.items()}
    }
    if undecided:
        details["undecided"] = ["math"]
    return ItemResult(id="0", reward=reward, error=error, details=details, verifier=INFO)


def test_answer_shape_and_component_logs() -> None:
    answer = to_response([result(1.0, math=1.0), result(0.0, math=0.0)], ["math"], 0.0)
    assert answer.model_dump() == {
        "rewards": [1.0, 0.0],
        "scores": [1.0, 0.0],
        "extra_logs": {"math": [1.0, 0.0], "undecided": [0.0, 0.0], "failed": [0.0, 0.0]},
        "errors": [],
    }


@pytest.mark.parametrize(
    "exc",
    [
        BadInput("ground_truth: Field required", field="math.ground_truth"),
        ConfigurationError("spec s: formula: math domain error"),
        InternalError("sympy raised"),
        ScoringTimeout("math: past the 10 s deadline"),
    ],
)
def test_a_failed_item_gets_the_failed_reward_and_is_listed_the_rest_is_scored(
    exc: Exception,
) -> None:
    assert isinstance(exc, TribunalError)
    error = ItemError.from_exception(exc)
    batch = [
        result(1.0, math=1.0),
        result(None, error),
        BadInput("labels.2: null", field="labels.2"),
    ]
    answer = to_response([*batch, result(0.0, math=0.0)], ["math"], -1.0)
    assert answer.rewards == [1.0, -1.0, -1.0, 0.0] and answer.scores == [1.0, 0.0, 0.0, 0.0]
    assert answer.extra_logs == {
        "math": [1.0, 0.0, 0.0, 0.0],
        "undecided": [0.0, 0.0, 0.0, 0.0],
        "failed": [0.0, 1.0, 1.0, 0.0],
    }
    assert [(e.index, e.code, e.field) for e in answer.errors] == [
        (1, exc.code, exc.field),
        (2, "bad_input", "labels.2"),
    ]


def test_a_schema_errors_place_among_the_scored_items_is_not_its_field() -> None:
    error = ItemError.from_exception(
        BadInput("items.0.num_turns: not an integer", field="items.0.num_turns")
    )
    answer = to_response(
        [BadInput("labels.0: null", field="labels.0"), result(None, error)], [], 0.0
    )
    assert [(e.index, e.field) for e in answer.errors] == [(0, "labels.0"), (1, "num_turns")]


def test_an_undecided_item_keeps_its_combined_reward_and_scores_0() -> None:
    answer = to_response([result(-0.9, undecided=True, math=0.0)], ["math"], -2.0)
    assert answer.rewards == [-0.9] and answer.scores == [0.0] and answer.errors == []
    assert answer.extra_logs["undecided"] == [1.0] and answer.extra_logs["failed"] == [0.0]


def test_only_the_infrastructures_errors_refuse_the_request_retryably() -> None:
    for exc in (BackendUnavailable("down"), QueueFull("full")):
        assert isinstance(exc, TribunalError)
        error = ItemError.from_exception(exc)
        with pytest.raises(type(exc)) as caught:
            to_response([result(1.0, math=1.0), result(None, error)], ["math"], 0.0)
        assert caught.value.retryable and caught.value.field == "query.1"


def test_a_spec_without_a_failed_reward_is_refused_on_the_trainer_routes() -> None:
    from tribunal.gateway.specs import load_spec_text

    text = "name: s\nversion: '1'\ncomponents:\n  math: {verifier: math}\n"
    with pytest.raises(ConfigurationError, match="neither failed_reward nor undecided_reward"):
        failed_reward(load_spec_text(text).spec)
    assert failed_reward(load_spec_text(text + "undecided_reward: 0.5\n").spec) == 0.5
    both = text + "undecided_reward: 0.5\nfailed_reward: -1\n"
    assert failed_reward(load_spec_text(both).spec) == -1.0
    # A spec that sets no failed_reward hashes as before the field existed.
    assert load_spec_text(text).hash != load_spec_text(text + "failed_reward: 0\n").hash
    for name, loaded in shipped_specs().items():
        lowest = failed_reward(loaded.spec)
        assert lowest <= 0.0, f"{name}: a failed item would be paid {lowest}"


def test_end_of_sequence_and_padding_tokens_come_off_the_response() -> None:
    assert strip_end_tokens("#### 18<|im_end|>") == "#### 18"
    assert strip_end_tokens("#### 18</s>\n<pad><pad>") == "#### 18"
    assert strip_end_tokens("x <|eot_id|><|endoftext|> ") == "x"
    assert strip_end_tokens("#### 18[[STOP]]", ("[[STOP]]",)) == "#### 18"
    # only at the end: a token inside the response is the response's own text
    assert strip_end_tokens("a <|im_end|> b") == "a <|im_end|> b"
    prompt = "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
    request = GetRewardRequest(
        query=[prompt + "#### 7[[STOP]]<|im_end|>"],
        prompts=[prompt],
        labels=["7"],
        end_tokens=["[[STOP]]"],
    )
    [item] = to_items(request, "rloo_math")
    assert item["response"] == "#### 7"


@pytest.mark.parametrize("label", [None, "", {}, []])
def test_a_null_or_empty_label_fails_its_item_by_name(label: object) -> None:
    request = GetRewardRequest(
        query=["P: #### 7", "P: #### 7"], prompts=["P: "] * 2, labels=["7", label]
    )
    scored, refused = to_items(request, "rloo_math")
    assert isinstance(scored, dict) and scored["ground_truth"] == "7"
    assert isinstance(refused, BadInput) and refused.field == "labels.1"
    assert "label" in refused.message


def test_scores_are_each_specs_score_in_0_1_not_its_reward() -> None:
    specs = shipped_specs()
    # tcr_agent: reward +1 / -0.9 (a wrong answer after 4 turns); score: correctness.
    tcr = specs["tcr_agent"].score
    right = result(1.0, correct=1.0, num_turns=2.0, overlong=0.0)
    wrong = result(-0.9, correct=0.0, num_turns=4.0, overlong=0.0)
    components = list(specs["tcr_agent"].spec.components)
    answer = to_response([right, wrong], components, -2.1, tcr)
    assert answer.rewards == [1.0, -0.9] and answer.scores == [1.0, 0.0]
    assert answer.extra_logs == {
        "correct": [1.0, 0.0],
        "num_turns": [2.0, 4.0],
        "overlong": [0.0, 0.0],
        "undecided": [0.0, 0.0],
        "failed": [0.0, 0.0],
    }
    # A group of one right and one wrong has mean score 0.5: inside OpenRLHF's (0, 1).
    assert 0 < sum(answer.scores) / 2 < 1
    refiner = specs["refiner_balanced"].score
    answer = to_response(
        [result(5.25, judge=0.5, citation=0.5)], ["judge", "citation"], 0.0, refiner
    )
    assert answer.scores == [0.5]
    for name, loaded in specs.items():
        assert loaded.score is not None, f"{name} says nothing of its score"


def test_a_score_outside_0_1_or_over_a_missing_component_fails_that_item() -> None:
    from tribunal.gateway.specs import load_spec_text

    text = "name: s\nversion: '1'\ncomponents:\n  math: {verifier: math}\nscore: "
    over = load_spec_text(text + "2 * reward - 1\n").score
    answer = to_response([result(1.0, math=1.0), result(0.4, math=0.4)], ["math"], 0.0, over)
    assert answer.rewards == [1.0, 0.0] and answer.scores == [1.0, 0.0]
    [error] = answer.errors
    assert (error.index, error.code, error.field) == (1, "configuration_error", "score")
    assert "gave -0.2 for item 0, outside [0, 1]" in error.message
    missing = to_response([result(1.0)], ["math"], 0.0, load_spec_text(text + "math\n").score)
    assert [e.code for e in missing.errors] == ["configuration_error"]
    assert "cannot be computed" in missing.errors[0].message


_LONG_PROMPT = (
    "<|im_start|>user\nJanet's ducks lay 16 eggs per day. She eats three for breakfast every "
    "morning and bakes muffins for her friends every day with four.<|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.mark.parametrize("cut", range(1, len(_LONG_PROMPT) - MIN_TRUNCATED_PROMPT_CHARS + 1, 7))
def test_a_query_from_inside_its_prompt_is_located(cut: int) -> None:
    # OpenRLHF keeps a too-long prompt's last tokens: any cut leaving 32 characters or more.
    query = "<|endoftext|>" + _LONG_PROMPT[cut:] + "She sells 9. #### 18<|im_end|>"
    truncated: list[int] = []
    request = GetRewardRequest(query=[query], prompts=[_LONG_PROMPT], labels=["18"])
    [item] = to_items(request, "rloo_math", truncated=truncated)
    assert item["response"] == "She sells 9. #### 18"
    assert item["question"] == _LONG_PROMPT and truncated == [0]


def test_a_query_of_another_prompt_or_too_little_of_this_one_is_refused() -> None:
    assert locate_truncated_response(_LONG_PROMPT[-31:] + "#### 18", _LONG_PROMPT) is None
    other = _LONG_PROMPT.replace("16 eggs", "61 eggs")
    assert locate_truncated_response(other[5:] + "#### 18", _LONG_PROMPT) is None
    # The same template's last line starts any chat query: too short to tell a prompt by.
    request = GetRewardRequest(
        query=["<|im_start|>assistant\n#### 18"], prompts=[_LONG_PROMPT], labels=["18"]
    )
    [refused] = to_items(request, "rloo_math")
    assert isinstance(refused, BadInput) and refused.message.startswith("query.0: its prompt")
