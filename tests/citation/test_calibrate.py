"""``tribunal calibrate citation``: agreement of a support mode with human labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tribunal.citation.calibrate import LabelledClaim, agreement, cohen_kappa, read_labels
from tribunal.cli import app
from tribunal.wire.errors import BadInput

HELD_IN = Path(__file__).parent / "cases" / "attributionbench.jsonl"


def claim(answer: str, label: str) -> LabelledClaim:
    return LabelledClaim(answer, "A claim.", {"E1": "A passage."}, label)  # type: ignore[arg-type]


def test_agreement_figures_on_a_hand_counted_set() -> None:
    labels = [
        claim("a", "supported"),
        claim("a", "supported"),
        claim("b", "unsupported"),
        claim("b", "unsupported"),
        claim("c", "supported"),
    ]
    verdicts = ["supported", "partial", "supported", "unsupported", "supported"]
    result = agreement(labels, verdicts)  # type: ignore[arg-type]
    # 2 of 3 paid in full are human-supported; 2 of 3 human-supported are paid in full.
    assert (result.precision, result.recall) == (pytest.approx(2 / 3), pytest.approx(2 / 3))
    # p_o = 3/5; p_e = 0.6·0.6 + 0.4·0.4 = 0.52; kappa = 0.08 / 0.48.
    assert result.kappa == pytest.approx(0.08 / 0.48)
    assert result.confusion["supported"] == {
        "supported": 2,
        "partial": 1,
        "unsupported": 0,
        "gated": 0,
    }
    assert result.disagreements == {
        "supported_paid_partial": 1,
        "supported_paid_nothing": 0,
        "unsupported_paid_in_full": 1,
        "unsupported_paid_partial": 0,
    }
    # Per answer: rewards (0.75, 0.5, 1.0) against human shares (1.0, 0.0, 1.0).
    assert result.answers == 3
    assert result.answer_mean_gap == pytest.approx((0.25 + 0.5 + 0.0) / 3)


def test_kappa_is_undefined_for_two_constant_equal_raters() -> None:
    assert cohen_kappa([(True, True)] * 3) is None


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"answer": "a", "claim": "c", "evidence": {"E": "p"}, "label": "yes"}', "label"),
        ('{"answer": "a", "claim": "c", "evidence": {}, "label": "supported"}', "evidence"),
        ('{"answer": "a", "claim": "", "evidence": {"E": "p"}, "label": "supported"}', "claim"),
        (
            '{"answer": "a", "claim": "c", "evidence": {"E": "p"}, "label": "supported", '
            '"score": 1}',
            "score",
        ),
    ],
)
def test_a_bad_line_is_refused_naming_its_field(tmp_path: Path, line: str, field: str) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(BadInput) as raised:
        read_labels(path)
    assert raised.value.field == field and ":1:" in raised.value.message


def test_the_command_on_the_held_in_set() -> None:
    labels = read_labels(HELD_IN)
    result = CliRunner().invoke(app, ["calibrate", "citation", str(HELD_IN), "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output.strip().splitlines()[-1])
    assert figures["claims"] == len(labels) == 300
    assert figures["answers"] == len({c.answer for c in labels})
    for label in ("supported", "unsupported"):
        assert sum(figures["confusion"][label].values()) == sum(c.label == label for c in labels)
    # Default deny: what lexical mode pays in full is mostly what humans support.
    assert figures["precision"] > 0.6 and figures["kappa"] > 0
