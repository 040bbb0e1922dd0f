"""The reward formula: per-claim scores, aggregates and both presets, with known answers."""

from __future__ import annotations

import pytest

from tribunal.citation.gates import FormatReport, IdReport
from tribunal.citation.parse import Claim
from tribunal.citation.scorer import PRESETS, Preset, aggregate, f1_score, score_claim
from tribunal.wire.citation_verdicts import ClaimJudgment, Relevance, SupportVerdict

VALID = FormatReport(True, 1, True, ())
BROKEN = FormatReport(True, 1, False, ())
R, IRR = Relevance.RELEVANT, Relevance.IRRELEVANT


def cited(ids: tuple[str, ...], support: SupportVerdict, relevance: dict[str, Relevance]):  # type: ignore[no-untyped-def]
    return score_claim(Claim("c", ids, "cite"), (), None, ClaimJudgment(support, relevance))


def uncited(needs: bool):  # type: ignore[no-untyped-def]
    return score_claim(Claim("u"), (), None, ClaimJudgment(needs_citation=needs))


def test_claim_precision_is_per_cited_snippet_and_invalid_ids_count_zero() -> None:
    claim = Claim("c", ("A", "B", "X", "Y"), "cite")
    score = score_claim(
        claim, ("X", "Y"), None, ClaimJudgment(SupportVerdict.SUPPORTED, {"A": R, "B": IRR})
    )
    assert (score.precision, score.recall) == (0.25, 1.0)
    assert score.f1 == pytest.approx(f1_score(0.25, 1.0)) == pytest.approx(0.4)


def test_gated_claims_earn_zero_and_count() -> None:
    score = score_claim(Claim("c", ("X",), "cite"), ("X",), "invalid_ids", None)
    assert (score.precision, score.recall, score.f1, score.counted) == (0.0, 0.0, 0.0, True)


def test_tribunal_preset_skips_uncited_sentences_without_need() -> None:
    claims = [
        cited(("A",), SupportVerdict.SUPPORTED, {"A": R}),  # F1 1
        cited(("B",), SupportVerdict.PARTIAL, {"B": R}),  # F1 2/3
        uncited(needs=True),  # F1 0
        uncited(needs=False),  # skipped
    ]
    ids = IdReport(("A", "B"), (), 1.0)
    answer = aggregate(claims, VALID, ids, PRESETS["tribunal"], judged=True)
    assert answer.precision == 1.0
    assert answer.recall == pytest.approx((1 + 0.5 + 0) / 3)
    assert answer.f1 == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert answer.reward == pytest.approx(answer.f1)


def test_dr_tulu_preset_counts_uncited_filler_as_one_and_pays_valid_ids() -> None:
    claims = [cited(("A",), SupportVerdict.PARTIAL, {"A": R}), uncited(needs=False)]
    ids = IdReport(("A", "X"), ("X",), 0.5)
    answer = aggregate(claims, BROKEN, ids, PRESETS["dr_tulu"], judged=True)
    f1_prime = (2 / 3 + 1.0) / 2
    assert answer.f1_term == pytest.approx(f1_prime)
    assert answer.reward == pytest.approx(0.6 * f1_prime + 0.4 * 0.5)  # no format gate


def test_the_tribunal_format_gate_zeroes_a_malformed_answer() -> None:
    claims = [cited(("A",), SupportVerdict.SUPPORTED, {"A": R})]
    answer = aggregate(claims, BROKEN, IdReport(("A",), (), 1.0), PRESETS["tribunal"], judged=True)
    assert answer.reward == 0.0 and answer.gate_passed is False and answer.f1 == 1.0


def test_mode_none_pays_the_valid_id_share_only() -> None:
    answer = aggregate(
        [], VALID, IdReport(("A", "X"), ("X",), 0.5), PRESETS["tribunal"], judged=False
    )
    assert (answer.reward, answer.precision, answer.recall, answer.f1) == (0.5, None, None, None)


def test_no_answer_block_scores_zero_under_every_preset() -> None:
    no_answer = FormatReport(False, 0, False, ())
    for preset in PRESETS.values():
        assert aggregate([], no_answer, IdReport((), (), 0.0), preset, judged=True).reward == 0.0


def test_weights_must_sum_to_one() -> None:
    with pytest.raises(ValueError, match="must be 1"):
        Preset("tribunal", 0.7, 0.7, format_gate=True, uncited_without_need="skip")
