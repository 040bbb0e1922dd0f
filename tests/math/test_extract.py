"""Final-answer extraction (tribunal.math.extract), one test per behaviour."""

from __future__ import annotations

import pytest

from tribunal.math import extract_answer
from tribunal.math.extract import Extraction, clean_answer, last_boxed

ONE_MB = 1_000_000


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (r"so $\boxed{\frac{1}{2}}$.", Extraction(r"\frac{1}{2}", "boxed")),
        (
            r"\boxed{\frac{\sqrt{2}}{\left(1+x\right)}}",
            Extraction(r"\frac{\sqrt{2}}{\left(1+x\right)}", "boxed"),
        ),
        (r"\boxed{\{1, 2\}}", Extraction(r"\{1, 2\}", "boxed")),
        (r"\boxed {5}", Extraction("5", "boxed")),
        (r"\fbox{7}", Extraction("7", "fbox")),
        (r"\boxed{**12**.}", Extraction("12", "boxed")),
        (r"\boxed{$x = 3$}", Extraction("x = 3", "boxed")),
    ],
)
def test_boxed_content_with_nested_braces(response: str, expected: Extraction) -> None:
    assert extract_answer(response) == expected


def test_last_boxed_wins() -> None:
    response = r"First try \boxed{3}, but that is wrong; redo: \boxed{4}. Hence 17 steps."
    assert extract_answer(response) == Extraction("4", "boxed")


def test_last_of_boxed_and_fbox_wins() -> None:
    assert extract_answer(r"\boxed{5} and then \fbox{6}") == Extraction("6", "fbox")
    assert extract_answer(r"\fbox{6} and then \boxed{5}") == Extraction("5", "boxed")


def test_unclosed_last_boxed_falls_back_to_the_last_closed_one() -> None:
    assert extract_answer(r"\boxed{8} then \boxed{\frac{1}{2}") == Extraction("8", "boxed")


def test_escaped_braces_do_not_close_a_box() -> None:
    assert last_boxed(r"\boxed{\}1}") == Extraction(r"\}1", "boxed")


def test_empty_boxed_is_skipped() -> None:
    assert extract_answer(r"\boxed{2} and \boxed{ }") == Extraction("2", "boxed")


def test_boxed_beats_hashes_and_phrases() -> None:
    response = "The answer is 3.\n#### 4\nso \\boxed{5}"
    assert extract_answer(response) == Extraction("5", "boxed")


@pytest.mark.parametrize(
    ("response", "text"),
    [
        ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.\n#### 18", "18"),
        ("total\n#### 1,000", "1,000"),
        ("#### -3.5\n", "-3.5"),
        ("#### $18.", "$18"),
        ("##### 7", "7"),
    ],
)
def test_gsm8k_hashes(response: str, text: str) -> None:
    assert extract_answer(response) == Extraction(text, "gsm8k_hash")


def test_empty_hash_line_falls_through() -> None:
    assert extract_answer("so 12 apples\n####") == Extraction("12", "last_number")


@pytest.mark.parametrize(
    ("response", "text"),
    [
        ("The answer is 18.", "18"),
        ("The answer is **73**.", "73"),  # Math-Verify issue #76 read this as ``73**``
        ("Final answer: x = 3", "x = 3"),
        ("The final answer is $\\frac{1}{2}$. I hope it is correct.", "\\frac{1}{2}"),
        ("So the answer is \\(2\\sqrt{3}\\) units", "2\\sqrt{3}"),
        ("**Final Answer:** 42", "42"),
        ("Answer: 7\nmore text", "7"),
        ("The answer is 18 apples because she ate two.", "18 apples"),
        ("The answer is 5. Wait, the answer is 6.", "6"),
        ("The answer is $18.", "$18"),
        ("The answer is 3.25.", "3.25"),
    ],
)
def test_answer_phrase(response: str, text: str) -> None:
    assert extract_answer(response) == Extraction(text, "answer_phrase")


def test_answer_phrase_needs_is_or_colon() -> None:
    # "the answer to part (a)" is not an answer statement; the last number is.
    assert extract_answer("the answer to part 1 needs 4 more steps") == Extraction(
        "4", "last_number"
    )


@pytest.mark.parametrize(
    ("response", "text"),
    [
        ("She has 5 apples and buys 7 more, 12 in all.", "12"),
        ("It costs -4 dollars", "-4"),
        ("5-3 leaves", "3"),
        ("a total of 1,000,000.", "1,000,000"),
        ("about 3.14 meters.", "3.14"),
    ],
)
def test_last_number_as_last_resort(response: str, text: str) -> None:
    assert extract_answer(response) == Extraction(text, "last_number")


def test_last_number_can_be_disabled() -> None:
    assert extract_answer("12 in all", allow_last_number=False) is None


@pytest.mark.parametrize("response", ["", "I do not know.", "it is unclear", "\\boxed{}"])
def test_no_answer(response: str) -> None:
    assert extract_answer(response) is None


def test_clean_answer_strips_layers() -> None:
    assert clean_answer(" **$5$**. ") == "5"
    assert clean_answer("$$x+1$$") == "x+1"
    assert clean_answer(r"\$5") == r"\$5"  # a dollar sign, not math


@pytest.mark.slow
@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{" * (ONE_MB // 7),
        "\\boxed{" * (ONE_MB // 14) + "1" + "}" * (ONE_MB // 14),
        "{" * ONE_MB,
        "}" * ONE_MB,
        "\\" * ONE_MB,
        "1" * ONE_MB,
        "1," * (ONE_MB // 2),
        "1." * (ONE_MB // 2),
        "-" * ONE_MB,
        "#" * ONE_MB,
        "$" * ONE_MB,
        "The answer is " * (ONE_MB // 14),
        "The answer" + " " * ONE_MB,
        "final" + " " * ONE_MB + "x",
        ">" * ONE_MB + "answer",
        "answer:\n" * (ONE_MB // 8),
        "The cat sat on 3 mats. " * (ONE_MB // 23),
        "\\boxed{1} and " * (ONE_MB // 14),
        "$1$ and " * (ONE_MB // 8),
        "\\boxed{1} " + "and " * 60 + "x \\boxed{2}",  # no exponential backtracking
        "\\boxed{1}" + " x =" * (ONE_MB // 4) + "\\boxed{2}",
        "Final answer: The " + "x is " * (ONE_MB // 5),
        "1/" * (ONE_MB // 2),
    ],
    ids=lambda response: repr(response[:16]),
)
@pytest.mark.timeout(60)
def test_one_megabyte_input_is_linear(response: str) -> None:
    # About 0.1-0.2 s each on one idle core; a quadratic scan of a megabyte would not end
    # in hours. The guard is pytest-timeout's, not a wall-clock assertion (which failed on a
    # loaded machine).
    extract_answer(response)


@pytest.mark.parametrize(
    ("response", "text"),
    [
        (r"\boxed{1}, \boxed{2}", "1, 2"),
        (r"\boxed{(2, 2)} \quad \text{and} \quad \boxed{(6, 2)}", "(2, 2), (6, 2)"),
        (r"\boxed{1} and \boxed{2} and \boxed{3}", "1, 2, 3"),
        (r"$y_1 = \boxed{5}$ and $y_2 = \boxed{-2}$", "5, -2"),
        (r"\boxed{(3, 3)} \text{ for part (a) and } \boxed{(1, 1)}", "(3, 3), (1, 1)"),
        (r"\boxed{1} papers and \boxed{2} bins", "1, 2"),
        (r"\boxed{4}, so \boxed{4}", "4"),  # a repeated box is one answer
    ],
)
def test_adjacent_boxes_are_one_answer(response: str, text: str) -> None:
    assert extract_answer(response) == Extraction(text, "boxed")


@pytest.mark.parametrize(
    "response",
    [
        r"First \boxed{3}, but that is wrong; redo: \boxed{2}",
        r"\boxed{1} no no no no no \boxed{2}",
        r"\boxed{\boxed{2}}",
    ],
)
def test_boxes_divided_by_prose_keep_the_last(response: str) -> None:
    assert extract_answer(response) == Extraction("2", "boxed")


def test_final_answer_phrase_after_the_last_box_wins() -> None:
    response = (
        r"interest: $\boxed{255}$, so $10,455 in all. Final Answer: The final answer is $10,455$."
    )
    assert extract_answer(response) == Extraction("10,455", "answer_phrase")
    assert extract_answer(r"The answer is \boxed{7}.") == Extraction("7", "boxed")


@pytest.mark.parametrize(
    ("response", "text"),
    [
        ("Final Answer: The largest $n$ is 34.", "34"),
        ("Final Answer: Jane started growing Sphere 3 hours ago. I hope it is correct.", "3"),
        (r'Final Answer: The final answer is "$12 $ and $13 $".', "12, 13"),
    ],
)
def test_answer_phrase_forms(response: str, text: str) -> None:
    assert extract_answer(response) == Extraction(text, "answer_phrase")


@pytest.mark.parametrize(
    ("response", "text"),
    [
        (r"So we get $\frac{1}{3}$.", r"\frac{1}{3}"),
        (r"Therefore $x = \sqrt{3}$", r"x = \sqrt{3}"),
        (r"Therefore $x \geq 5$ is the solution.", r"x \geq 5"),
        ("We get \\[\n\\frac{1}{3}\n\\]", r"\frac{1}{3}"),
        (r"So $$x^2$$ it is.", "x^2"),
        (r"so \(2\sqrt{3}\) units", r"2\sqrt{3}"),
        (r"costs \$5, so we get $\pi$ then", r"\pi"),
        (r"The roots are $1$ and $2$.", "1, 2"),
        # A restatement is not a list: spans with "=" or a relation are not joined.
        (r"so $AB = \frac{5}{4}$, or $1.25$.", "1.25"),
        (r"Because $x$ cannot be $0$, $x=5$.", "x=5"),
    ],
)
def test_last_math_span(response: str, text: str) -> None:
    assert extract_answer(response) == Extraction(text, "last_math")


@pytest.mark.parametrize(
    ("response", "text"),
    [
        # A "$" span holding prose is two dollar signs, not math.
        ("She earns $18 per day, and $36 in total.", "36"),
        # A bare number after the last math is the answer.
        ("Let $x$ be the count. Then 3 + 4 = 7 apples.", "7"),
        # Inline math does not cross a line.
        ("Answer $ \n 9 \n $", "9"),
        ("Soucis : 2,74 $ a..", "2,74"),  # a decimal comma
        ("the probability is 2/3. <|im_start|>user", "2/3"),
        ("it is 1,000.99m²", "1,000.99"),
        ("so 5-3 = 2:00 pm is the latest", "2"),  # not the minutes of a time
    ],
)
def test_last_number_after_or_without_math(response: str, text: str) -> None:
    assert extract_answer(response) == Extraction(text, "last_number")


@pytest.mark.parametrize(
    "response", [r"\frac{1}{3}", r"x \geq 5", "(1, 4.5)", "odd", r"\text{The midpoints}", "x and y"]
)
def test_a_bare_line_of_math_is_the_whole_answer(response: str) -> None:
    assert extract_answer(response) == Extraction(response, "whole_response")


@pytest.mark.parametrize(
    ("response", "text"),
    [
        (r"Therefore x = \sqrt{3}.", r"\sqrt{3}"),
        (r"Let $a$ be the side, so x = \frac{1}{2}", r"\frac{1}{2}"),
        ("The n-th term is a_n = 2^n", "2^n"),
    ],
)
def test_final_equation_after_prose(response: str, text: str) -> None:
    assert extract_answer(response) == Extraction(text, "final_equation")


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("so x = 5 apples.", Extraction("5", "last_number")),  # words after "=": not math
        ("she has 5 apples, so 2x = 10", Extraction("10", "last_number")),  # no lone variable
        # A bare line is the whole answer: an equation stays an equation.
        (r"y = -\frac12 x + 3/4", Extraction(r"y = -\frac12 x + 3/4", "whole_response")),
    ],
)
def test_final_equation_needs_prose_and_a_variable(response: str, expected: Extraction) -> None:
    assert extract_answer(response) == expected
