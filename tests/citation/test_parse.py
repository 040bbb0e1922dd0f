"""Parsing answers: both grammars, every id form, and DR Tulu's parsing bugs as regressions."""

from __future__ import annotations

import pytest

from tribunal.citation.parse import Claim, parse_answer, split_ids


def cited(response: str) -> list[Claim]:
    return parse_answer(response).cited_claims


@pytest.mark.parametrize(
    "tag",
    [
        "<cite id=A,B>",
        '<cite id="A,B">',
        "<cite id='A,B'>",
        '<cite ids="A,B">',  # DR Tulu's own prompt example, never matched by its regex
        '<cite ids="A, B">',
        "<cite id = A,B>",
        '<cite id="A,B" source="x">',
        "<cite id=A, B>",  # unquoted, a space after the comma: B was dropped before
        "<cite ids=A , B>",
        "<cite id=A,\tB >",
        "<cite id=A, B url=https://x.org/a?b=1>",
        "<cite id=A,B,>",
        "<CITE ID='A, B'>",
        '<cite id=" A ,B ">',
    ],
)
def test_every_id_form_of_the_cite_grammar_gives_both_ids(tag: str) -> None:
    assert cited(f"<answer>{tag}Cats purr at 25 Hz.</cite></answer>") == [
        Claim("Cats purr at 25 Hz.", ("A", "B"), "cite")
    ]


@pytest.mark.parametrize("tag", ["<snippet id=A,B>", '<snippet id="A, B">', "<snippet ids=A,B>"])
def test_the_seed_models_snippet_grammar(tag: str) -> None:
    assert cited(f"<answer>{tag}Cats purr.</snippet></answer>") == [
        Claim("Cats purr.", ("A", "B"), "snippet")
    ]


@pytest.mark.parametrize(
    ("tag", "ids"),
    [
        ("<cite id=A B>", ("A",)),
        ('<cite id=["A", "B"]>', ("[",)),
        ('<cite id="A B">', ("A B",)),
        ('<cite id="A" id="B">', ("A",)),
        ("<cite id=A; B>", ("A;",)),
    ],
)
def test_an_unreadable_id_list_is_a_format_problem_not_a_dropped_id(
    tag: str, ids: tuple[str, ...]
) -> None:
    parsed = parse_answer(f"<answer>{tag}Cats purr.</cite></answer>")
    assert [p.kind for p in parsed.problems] == ["unreadable_ids"]
    assert [c.ids for c in parsed.cited_claims] == [ids]


def test_an_id_list_is_split_in_linear_time() -> None:
    many = ",".join(f"X{i}" for i in range(200_000))
    assert len(split_ids(many + "," + many)) == 200_000


def test_a_multi_id_claim_keeps_all_its_ids() -> None:
    # DR Tulu: ``for citation_id in ids.split(","): claims[text] = [citation_id]`` kept "C".
    [claim] = cited("<answer><cite id=A,B,C>Claim.</cite></answer>")
    assert claim.ids == ("A", "B", "C")


def test_repeated_ids_in_one_tag_count_once() -> None:
    assert split_ids("A, B,A ,,") == ("A", "B")


def test_two_identical_claim_sentences_are_two_claims() -> None:
    # DR Tulu keyed claims by their text, so the second copy vanished.
    answer = "<answer><cite id=A>Cats purr.</cite> <cite id=B>Cats purr.</cite></answer>"
    assert [c.ids for c in cited(answer)] == [("A",), ("B",)]


@pytest.mark.parametrize("text", ["p < 0.05 in the treated arm", "a -> b and x > 3", "<<x>>"])
def test_a_claim_may_contain_angle_brackets(text: str) -> None:
    # DR Tulu's ``[^<]+`` dropped such claims entirely.
    assert cited(f"<answer><cite id=A>{text}</cite></answer>") == [Claim(text, ("A",), "cite")]


def test_citations_outside_the_final_answer_block_do_not_count() -> None:
    response = (
        "<think><cite id=A>Reasoning claim.</cite></think>"
        "<answer>Old draft <cite id=B>draft claim</cite></answer>"
        "<answer>Final: <cite id=C>Final claim.</cite></answer>"
        "<cite id=D>After the answer.</cite>"
    )
    parsed = parse_answer(response)
    assert [c.ids for c in parsed.cited_claims] == [("C",)]
    assert parsed.answer_blocks == 2


def test_no_answer_block_means_no_claims() -> None:
    parsed = parse_answer("Cats purr. <cite id=A>Cats purr at 25 Hz.</cite>")
    assert parsed.answer is None and parsed.claims == []


def test_uncited_sentences_are_claims_and_headings_and_single_words_are_not() -> None:
    parsed = parse_answer(
        "<answer>## Summary\n- **Incidence:** HPD occurred in 9% of patients. "
        "<cite id=A>Champiat et al. 2017.</cite> In short, yes.</answer>"
    )
    assert [(c.text, c.ids) for c in parsed.claims] == [
        ("- **Incidence:** HPD occurred in 9% of patients.", ()),
        ("Champiat et al. 2017.", ("A",)),
        ("In short, yes.", ()),
    ]


@pytest.mark.parametrize(
    "layout",
    [
        "Aspirin cures\ncancer in\nall adults.",  # hard-wrapped
        "| drug | effect |\n|---|---|\n| aspirin | cures cancer in all adults |",  # a table
        "- aspirin\n  cures cancer in all adults",  # a wrapped bullet
    ],
)
def test_a_fact_in_short_lines_is_one_uncited_claim(layout: str) -> None:
    # The former line-break split dropped every fragment under four words.
    parsed = parse_answer(f"<answer><cite id=A>Cats purr.</cite>\n{layout}</answer>")
    uncited = [c.text for c in parsed.claims if not c.is_cited]
    assert any("cures cancer in all adults" in text for text in uncited), uncited


def test_sentences_do_not_split_after_abbreviations() -> None:
    parsed = parse_answer(
        "<answer>Smith et al. reported a rise vs. baseline. Then it fell again.</answer>"
    )
    assert [c.text for c in parsed.claims] == [
        "Smith et al. reported a rise vs. baseline.",
        "Then it fell again.",
    ]


@pytest.mark.parametrize(
    ("answer", "kinds"),
    [
        ("<cite id=A>one <cite id=B>two</cite> three</cite>", ["nested", "unopened"]),
        ("<cite id=A>never closed", ["unclosed"]),
        ("stray</cite> end", ["unopened"]),
        ("<cite id=A>mixed</snippet>", ["mismatched"]),
        ('<cite id="">no ids</cite>', ["empty_ids"]),
        ("<cite id=A> </cite>", ["empty_claim"]),
    ],
)
def test_malformed_tags_are_reported_not_raised(answer: str, kinds: list[str]) -> None:
    parsed = parse_answer(f"<answer>{answer}</answer>")
    assert [p.kind for p in parsed.problems] == kinds


def test_a_nested_claim_keeps_the_outer_ids_and_all_text() -> None:
    parsed = parse_answer("<answer><cite id=A>one <cite id=B>two</cite></answer>")
    assert parsed.cited_claims == [Claim("one  two", ("A",), "cite")]


def test_an_unclosed_answer_block_runs_to_the_end() -> None:
    parsed = parse_answer("<answer><cite id=A>Cats purr.</cite>")
    assert parsed.answer_closed is False and len(parsed.cited_claims) == 1


def test_parsing_is_linear_on_hostile_input() -> None:
    # 200k unclosed openings and angle brackets: one regex pass, no backtracking blow-up.
    parsed = parse_answer("<answer>" + "<cite id=A>x < y " * 100_000 + "</answer>")
    assert len(parsed.problems) == 100_000


def test_tags_without_a_closing_bracket_stay_linear() -> None:
    parsed = parse_answer("<answer>" + "<cite id=A " * 100_000 + "</answer>")
    assert parsed.cited_claims == [] and parsed.problems == []


@pytest.mark.parametrize(
    "tag",
    [
        '<cite id="A,B" source="x">',
        "<cite id=A, B url=https://x.org/a?b=1>",
        "<cite note='Cats fly.' id=A,B>",
    ],
)
def test_an_attribute_other_than_the_id_is_refused_by_name(tag: str) -> None:
    # A fact in an attribute would be read by no check: the tag fails the format gate.
    parsed = parse_answer(f"<answer>{tag}Cats purr.</cite></answer>")
    assert [p.kind for p in parsed.problems] == ["unknown_attribute"]
    assert [c.ids for c in parsed.cited_claims] == [("A", "B")]


def test_unclosed_tags_with_long_unquoted_ids_are_read_in_linear_time() -> None:
    # The former tag pattern backtracked through the id for every '>'-less tag; the scan
    # now looks for each tag's '>' once. 200 such tags of a 5,000-character id each, and a
    # closed one after them, are read in one pass (counted by the tags found, not timed).
    hostile = ("<cite id=" + "x" * 5_000 + " ") * 200
    parsed = parse_answer(f"<answer>{hostile}<cite id=A>Cats purr.</cite></answer>")
    assert [c.ids for c in parsed.cited_claims] == [("A",)]
