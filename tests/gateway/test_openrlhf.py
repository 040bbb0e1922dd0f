"""OpenRLHF's body -> gateway items, and results -> OpenRLHF's answer (no HTTP here; the
route itself runs in tests/e2e/test_gateway_service.py)."""

from __future__ import annotations

import pytest

from tribunal.gateway.openrlhf import (
    MIN_TRUNCATED_PROMPT_CHARS,
    GetRewardRequest,
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
    ScoringTimeout,
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
    ("prompts", "field"),
    [
        (None, "prompts"),
        (["What is 3 + 4?", "What is 1 + 1?"], "query.1"),
        (["What is 3 + 4?", "What is 2 + 2? Think."], "query.1"),
        (["What is 3 + 4?", "What is 2 + 2?!"], "query.1"),
        (["What is 3 + 4?", "Q: What is 2 + 2?"], "query.1"),
    ],
)
def test_a_query_whose_prompt_is_not_found_is_refused_by_name(
    prompts: list[str] | None, field: str
) -> None:
    request = GetRewardRequest(
        query=["What is 3 + 4? 7", "What is 2 + 2? I do not know."],
        prompts=prompts,
        labels=["7", "4"],
    )
    with pytest.raises(BadInput) as caught:
        to_items(request, "rloo_math")
    assert caught.value.field == field


def test_lengths_must_agree() -> None:
    with pytest.raises(ValueError, match="labels: 1 entries for 2 queries"):
        GetRewardRequest(query=["a", "b"], labels=["1"])


def result(reward: float | None, error: ItemError | None = None, **subs: float) -> ItemResult:
    details = {"sub_rewards": {name: {"reward": value} for name, value in subs.items()}}
    return ItemResult(id="0", reward=reward, error=error, details=details, verifier=INFO)


def test_answer_shape_and_component_logs() -> None:
    answer = to_response([result(1.0, math=1.0), result(0.0, math=0.0)])
    assert answer.model_dump() == {
        "rewards": [1.0, 0.0],
        "scores": [1.0, 0.0],
        "extra_logs": {"math": [1.0, 0.0]},
    }


@pytest.mark.parametrize(
    ("exc", "status"),
    [(BadInput("ground_truth: Field required"), 422), (BackendUnavailable("down"), 503)],
)
def test_one_failed_item_refuses_the_batch_with_its_class(exc: Exception, status: int) -> None:
    assert isinstance(exc, BadInput | BackendUnavailable)
    error = ItemError.from_exception(exc)
    with pytest.raises(type(exc)) as caught:
        to_response([result(1.0), result(None, error)])
    assert caught.value.http_status == status
    assert "1 of 2 items could not be scored" in caught.value.message


@pytest.mark.parametrize(
    "exc", [ScoringTimeout("math: past the 10 s deadline"), InternalError("sympy raised")]
)
def test_an_undecided_item_gets_the_specs_policy_not_a_batch_error(exc: Exception) -> None:
    assert isinstance(exc, ScoringTimeout | InternalError)
    error = ItemError.from_exception(exc)
    answer = to_response([result(1.0, math=1.0), result(None, error), result(0.0, math=0.0)], -1.0)
    # The undecided item scores 0: for dynamic filtering it is a wrong answer.
    assert answer.rewards == [1.0, -1.0, 0.0] and answer.scores == [1.0, 0.0, 0.0]
    assert answer.extra_logs["undecided"] == [0.0, 1.0, 0.0]
    # A spec without the policy refuses the batch, as a setting to fix (not a retry).
    with pytest.raises(ConfigurationError, match="undecided_reward") as caught:
        to_response([result(1.0), result(None, error)])
    assert caught.value.retry_after_s is None and not caught.value.retryable


def test_the_undecided_policy_never_covers_bad_input_or_a_verifier_down() -> None:
    for exc in (BadInput("ground_truth: Field required"), BackendUnavailable("down")):
        assert isinstance(exc, BadInput | BackendUnavailable)
        error = ItemError.from_exception(exc)
        with pytest.raises(type(exc)):
            to_response([result(1.0), result(None, error)], -1.0)


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


@pytest.mark.parametrize("labels", [None, [None], [""], [{}], [[]]])
def test_a_missing_null_or_empty_label_is_refused_by_name(labels: list[object] | None) -> None:
    request = GetRewardRequest(query=["P: #### 7"], prompts=["P: "], labels=labels)
    with pytest.raises(BadInput) as refused:
        to_items(request, "rloo_math")
    assert refused.value.field == ("labels" if labels is None else "labels.0")
    assert "label" in refused.value.message


def test_scores_are_each_specs_score_in_0_1_not_its_reward() -> None:
    specs = shipped_specs()
    # tcr_agent: reward +1 / -0.9 (a wrong answer after 4 turns); score: correctness.
    tcr = specs["tcr_agent"].score
    right = result(1.0, correct=1.0, num_turns=2.0, overlong=0.0)
    wrong = result(-0.9, correct=0.0, num_turns=4.0, overlong=0.0)
    answer = to_response([right, wrong], -1.0, tcr)
    assert answer.rewards == [1.0, -0.9] and answer.scores == [1.0, 0.0]
    assert answer.extra_logs == {
        "correct": [1.0, 0.0],
        "num_turns": [2.0, 4.0],
        "overlong": [0.0, 0.0],
    }
    # A group of one right and one wrong has mean score 0.5: inside OpenRLHF's (0, 1).
    assert 0 < sum(answer.scores) / 2 < 1
    refiner = specs["refiner_balanced"].score
    answer = to_response([result(5.25, judge=0.5, citation=0.5)], None, refiner)
    assert answer.scores == [0.5]
    for name, loaded in specs.items():
        assert loaded.score is not None, f"{name} says nothing of its score"


def test_a_score_outside_0_1_or_over_a_missing_component_is_a_configuration_error() -> None:
    from tribunal.gateway.specs import load_spec_text

    text = "name: s\nversion: '1'\ncomponents:\n  math: {verifier: math}\nscore: "
    over = load_spec_text(text + "2 * reward\n").score
    with pytest.raises(ConfigurationError, match="outside"):
        to_response([result(1.0, math=1.0)], None, over)
    with pytest.raises(ConfigurationError, match="cannot be computed"):
        to_response([result(1.0)], None, load_spec_text(text + "math\n").score)


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
    with pytest.raises(BadInput, match=r"query\.0: its prompt"):
        to_items(request, "rloo_math")
