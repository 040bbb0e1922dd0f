"""What ``tribunal.citation.content`` reads from a text: numbers, entities, clauses."""

from __future__ import annotations

import pytest

from tribunal.citation.content import clauses, entities, negated, number_agrees, numbers


def test_numbers_with_units_scales_words_and_separators() -> None:
    found = numbers("Nine percent of 1,280 m; 1.2 million people; 12 of 131 (9 %), PD-1 in 2004.")
    assert [(n.value, n.unit) for n in found] == [
        (9.0, "%"),
        (1280.0, "m"),
        (1_200_000.0, ""),
        (12.0, ""),
        (131.0, ""),
        (9.0, "%"),
        (2004.0, ""),
    ]


@pytest.mark.parametrize(
    ("claim", "snippet", "agrees"),
    [
        ("9%", "9.4%", True),  # rounded to the claim's decimals
        ("9.2%", "9.4%", False),
        ("1947", "1937", False),
        ("1,280 m", "1280 km", False),  # units differ
        ("13.8 %", "13.8 percent", True),
    ],
)
def test_a_number_agrees_only_with_the_same_value_and_unit(
    claim: str, snippet: str, agrees: bool
) -> None:
    [number] = numbers(claim)
    assert number_agrees(number, numbers(snippet)) is agrees


def test_entities_skip_sentence_starts_and_acronyms_defined_in_place() -> None:
    text = "Roughly 9% of patients on programmed cell death 1 (PD-1) had HPD in Lyon."
    assert sorted(entities(text)) == ["hpd", "lyon"]
    assert sorted(entities("Hyperprogressive disease (HPD) was seen by Smith.")) == ["smith"]
    # A sentence's first word is an entity when the evidence writes it capitalised inside one.
    assert entities("Curie found it.", frozenset({"curie"})) == {"curie"}


def test_clauses_carry_their_own_negation_and_direction() -> None:
    first, second = clauses("Statins did not raise LDL, and ezetimibe lowered it.")
    assert (first.negated, first.directions) == (True, frozenset({1}))
    assert (second.negated, second.directions) == (False, frozenset({-1}))
    assert negated("It isn't so.") and negated("Il n'a pas été achevé.")
