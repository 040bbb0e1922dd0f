"""Rubrics, polarity rules and the static rubric sets."""

from __future__ import annotations

import pytest

from tribunal.wire.rubric_sets import available_rubric_sets, load_rubric_set
from tribunal.wire.rubrics import Polarity, Rubric, resolve_polarity_and_weight


@pytest.mark.parametrize(
    ("weight", "polarity", "expected"),
    [
        (None, None, (Polarity.POSITIVE, 1.0)),
        (3, None, (Polarity.POSITIVE, 3.0)),
        (-1, None, (Polarity.NEGATIVE, 1.0)),  # DR Tulu: negative weight = negative rubric
        (-2, Polarity.NEGATIVE, (Polarity.NEGATIVE, 2.0)),
        (0.5, Polarity.NEGATIVE, (Polarity.NEGATIVE, 0.5)),
    ],
)
def test_polarity_and_weight(
    weight: float | None, polarity: Polarity | None, expected: tuple[Polarity, float]
) -> None:
    assert resolve_polarity_and_weight(weight, polarity) == expected


@pytest.mark.parametrize(
    ("weight", "polarity"), [(0, None), (-1, Polarity.POSITIVE), (float("nan"), None)]
)
def test_polarity_and_weight_refused(weight: float, polarity: Polarity | None) -> None:
    with pytest.raises(ValueError):
        resolve_polarity_and_weight(weight, polarity)


def test_rubric_signed_weight() -> None:
    assert Rubric("x", Polarity.NEGATIVE, 2.0).signed_weight == -2.0
    with pytest.raises(ValueError):
        Rubric("  ")


def test_shipped_sets() -> None:
    assert {"v3", "general"} <= set(available_rubric_sets())
    v3 = load_rubric_set("v3")
    titles = {r.title: r.polarity for r in v3.rubrics}
    assert titles == {
        "Citation Discipline": Polarity.POSITIVE,
        "Off-Query Padding": Polarity.NEGATIVE,
        "Wrong-Entity Confabulation": Polarity.NEGATIVE,
    }
    assert all(r.source == v3.ref == f"v3@{v3.revision}" for r in v3.rubrics)
    assert all(len(r.text) > 200 and "\n" not in r.text for r in v3.rubrics)
    general = load_rubric_set("general")
    assert [r.title for r in general.rubrics] == ["Comprehensiveness", "Factuality", "Coherence"]


def test_pinned_and_unknown_sets() -> None:
    assert load_rubric_set("v3@1").name == "v3"
    with pytest.raises(KeyError, match="revision"):
        load_rubric_set("v3@99")
    with pytest.raises(KeyError, match="available"):
        load_rubric_set("v4")
