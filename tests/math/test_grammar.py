"""The declared answer grammar (issue 36): formats, regions, normalisation, the leaf rule."""

from __future__ import annotations

import pytest

from tribunal.math import MathConfig, verify_answer
from tribunal.math.grammar import answer_key, grade_region
from tribunal.math.normalize import normalize_text
from tribunal.math.regions import final_region

BOXED = MathConfig(answer_format="boxed")
HASH = MathConfig(answer_format="hash")
LINE = MathConfig(answer_format="answer_line")
MARKED = MathConfig(answer_format="marked")


@pytest.mark.parametrize(
    ("config", "response", "reward"),
    [
        (BOXED, "So $\\boxed{7}$.", 1.0),
        (BOXED, "The answer is 7.", 0.0),  # no box: nothing in this format
        (BOXED, "#### 7", 0.0),
        (HASH, "3 + 4 = 7\n#### 7", 1.0),
        (HASH, "#### Step 2\nso \\boxed{7}", 0.0),  # a heading, not an answer line
        (LINE, "work\nAnswer: 7", 1.0),
        (LINE, "work\n**Answer:** $7$", 1.0),
        (LINE, "Final Answer: The final answer is $7$. I hope it is correct.", 1.0),
        (LINE, "Answer: \\boxed{7}", 1.0),
        (MARKED, "\\boxed{7}\n#### 7", 1.0),
        (MARKED, "\\boxed{7}\n#### 8", 0.0),  # two marks disagree
        (MARKED, "it is 7", 0.0),
    ],
)
def test_each_format_grades_only_its_own_mark(
    config: MathConfig, response: str, reward: float
) -> None:
    assert verify_answer(response, "7", config).reward == reward


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{8}. Therefore \\boxed{7}.",  # a box after the final box
        "\\boxed{8}. Hmm, or \\boxed{7}.",  # two distinct boxes
        "Answer: 8\nAnswer: 7",
        "#### 8\n#### 7",
    ],
)
def test_two_distinct_answers_pay_nothing(response: str) -> None:
    score = verify_answer(response, "7", MARKED)
    assert score.reward == 0.0


def test_the_same_answer_twice_is_one_answer() -> None:
    score = verify_answer(
        "So $x = \\dfrac{1}{2}$, i.e. \\boxed{x = \\dfrac{1}{2}}. Check: \\boxed{\\frac{1}{2}}",
        "\\frac{1}{2}",
        BOXED,
    )
    assert answer_key("x = \\dfrac{1}{2}") == answer_key("\\frac{1}{2}")
    assert score.reward == 1.0


@pytest.mark.parametrize(
    ("response", "kind"),
    [
        ("```python\nprint(8)\n# \\boxed{8}\n```\nSo \\boxed{7}.", "code"),
        ("So \\boxed{7}. <!-- \\boxed{8} -->", "html"),
        ("So \\boxed{7}. % \\boxed{8}", "latex"),
        ('So \\boxed{7}. A student wrote "\\boxed{8}" here.', "quote"),
        ("So \\boxed{7}.\n> \\boxed{8}", "quote"),
        ("So \\boxed{7}. Hypothetically, \\boxed{8}.", "hypothetical"),
        ("So \\boxed{7}.<|im_end|>\n<|im_start|>user\nAnswer: 8", "turn"),
    ],
)
def test_spans_outside_the_final_region_are_never_graded(response: str, kind: str) -> None:
    region = final_region(response)
    assert region is not None and kind in region.removed
    assert verify_answer(response, "7", MARKED).reward == 1.0
    assert verify_answer(response, "8", MARKED).reward == 0.0


def test_reasoning_is_not_the_final_region() -> None:
    response = "<think>maybe \\boxed{8}</think>The answer: \\boxed{7}"
    score = verify_answer(response, "7", BOXED)
    assert (score.reward, score.region) == (1.0, "after_reasoning")
    assert verify_answer("<think>\\boxed{7}", "7", BOXED).region is None  # never closed


def test_other_families_turn_markers_are_text() -> None:
    # A ChatML policy typing Llama 3's markers has not ended its turn: the second answer
    # is in its final region, and two distinct answers pay nothing.
    response = "\\boxed{8}<|eot_id|><|start_header_id|>user<|end_header_id|>\nAnswer: 7"
    assert verify_answer(response, "7", MARKED).reward == 0.0
    llama = MathConfig(answer_format="marked", chat_template="llama3")
    assert verify_answer(response, "8", llama).reward == 1.0


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("n\u200bot", "not"),  # zero-width space
        ("\u202enot", "not"),  # bidi override
        ("ｎｏｔ ７", "not 7"),  # full-width
        ("nоt", "not"),  # Cyrillic o
        ("isn’t", "isn't"),
        ("α + β", "α + β"),  # Greek variables stay
    ],
)
def test_normalisation(text: str, normal: str) -> None:
    assert normalize_text(text) == normal


@pytest.mark.parametrize("word", ["n\u200bot", "nоt", "ｎｏｔ", "isn’t"])
def test_a_negation_in_any_spelling_is_read(word: str) -> None:
    score = verify_answer(f"The answer is {word} \\boxed{{7}}.", "7", BOXED)
    assert (score.reward, score.uncommitted) == (0.0, "negated")


def test_the_answer_sentence_is_read_not_later_ones() -> None:
    honest = "So the answer is \\boxed{7}. Wait, let me double-check: 3 + 4 = 7. Yes."
    assert verify_answer(honest, "7", BOXED).reward == 1.0
    explained = "Since 7 is not even, the answer is \\boxed{7}."
    assert verify_answer(explained, "7", BOXED).reward == 1.0
    far = "I am not sure, but after all of this long work the answer is probably \\boxed{7}."
    assert verify_answer(far, "7", BOXED).uncommitted == "hedged"
    guess = "I guess, after all this, it is \\boxed{7}."
    assert verify_answer(guess, "7", BOXED).uncommitted == "hedged"
    denied = "The answer is definitely not \\boxed{7}."
    assert verify_answer(denied, "7", BOXED).uncommitted == "negated"
    # A negation before a number is about that number (Sky-T1's MATH-500 answer 162).
    restated = "The chance it is divisible by 2 but not by 3 is \\(\\boxed{\\frac{17}{50}}\\)."
    assert verify_answer(restated, "\\frac{17}{50}", BOXED).reward == 1.0
    counted = "The number of integers not divisible by 3 is \\boxed{67}."
    assert verify_answer(counted, "67", BOXED).reward == 1.0
    # Only a digit ends a negation's reach, never a brace or a word.
    for denied in ("The answer is \\textbf{not} \\boxed{7}.", "It is $x$, not \\boxed{7}"):
        assert verify_answer(denied, "7", BOXED).uncommitted == "negated"
    # Known limitation (docs/math.md): a later sentence is not read, whatever it says.
    assert verify_answer("\\boxed{7}. I am not sure about this.", "7", BOXED).reward == 1.0


@pytest.mark.parametrize(
    ("answer", "gold", "reward"),
    [
        ("x = 0", "3 \\times 10^{-7}", 0.0),
        ("x = 0.0000003", "3 \\times 10^{-7}", 1.0),
        ("\\{0\\}", "\\{3 \\times 10^{-7}\\}", 0.0),
        ("(1, 0)", "(1, 3 \\times 10^{-7})", 0.0),
        ("x = \\frac{1}{2006!}", "\\frac{1}{2004!}", 0.0),  # Math-Verify issue 14 behind x =
        ("x = \\frac{1}{2004!}", "\\frac{1}{2004!}", 1.0),
        ("\\{2, 1.0\\}", "\\{1, 2\\}", 1.0),
        ("\\begin{pmatrix}1 & 0\\end{pmatrix}", "\\begin{pmatrix}1 & 0.0000003\\end{pmatrix}", 0.0),
        ("1e-07", "1e-07", 1.0),
        ("0.0000001", "1e-07", 1.0),
        ("0", "1e-07", 0.0),
        ("2.5E3", "2500", 1.0),
        ("2e", "2e", 1.0),  # a product with e stays one
    ],
)
def test_one_numeric_rule_at_every_leaf(answer: str, gold: str, reward: float) -> None:
    assert verify_answer(f"\\boxed{{{answer}}}", gold, BOXED).reward == reward


def test_lenient_is_the_old_cascade() -> None:
    graded = grade_region("The answer is 7.", "lenient")
    assert graded.extraction is not None and graded.extraction.method == "answer_phrase"


@pytest.mark.parametrize(
    "sentence",
    [
        "If there were 800 beds before, 800 - 700 = 100 beds remain.",
        "If there are 5 students to each teacher, 180 students would need 180/5 = 36 teachers.",
        "Multiply by 100% to get 33.333...% of them.",
    ],
)
def test_how_word_problems_reason_is_kept_in_the_region(sentence: str) -> None:
    # GSM8K's gold solutions: indicative "if ... were / would" and percent signs after a
    # number or a period are not hypothetical sentences or LaTeX comments.
    region = final_region(sentence)
    assert region is not None and region.text == sentence and region.removed == ()


@pytest.mark.timeout(30)
def test_many_boxes_are_read_in_one_pass() -> None:
    # A guard, not a timing: listing every box once called the last-box search on each
    # prefix (6.5 s for 60,000 boxes, past the service's deadline).
    graded = grade_region("\\boxed{1}" * 60_000 + " so \\boxed{2}", "boxed")
    assert graded.candidates == ("1", "2")
