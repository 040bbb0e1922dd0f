"""Evidence: structured maps and raw tool output of the request, never the response."""

from __future__ import annotations

import pytest

from tribunal.citation.evidence import (
    gather_evidence,
    harvest_snippets,
    tool_outputs_before_answer,
)
from tribunal.wire.errors import BadInput


def test_the_three_snippet_tags_with_quoted_and_unquoted_ids() -> None:
    raw = (
        '<snippet id="S1">Title: A\nAbstract: cats.</snippet>'
        "<snippets id=S2>dogs</snippets>"
        "<webpage id='W3' url='u'>birds</webpage>"
        '<snippet id="S1">a second copy</snippet>'
    )
    assert harvest_snippets(raw) == {"S1": "Title: A\nAbstract: cats.", "S2": "dogs", "W3": "birds"}


def test_structured_evidence_wins_and_tool_output_adds() -> None:
    evidence = gather_evidence(
        {"S1": "given"}, "<snippet id=S1>raw</snippet><snippet id=S2>b</snippet>"
    )
    assert evidence == {"S1": "given", "S2": "b"}


@pytest.mark.parametrize(
    ("evidence", "tool_output"),
    [(None, None), ({}, None), ({" ": "blank id"}, None), (None, "no snippet tags here")],
)
def test_a_request_without_snippets_is_refused_by_name(
    evidence: dict[str, str] | None, tool_output: str | None
) -> None:
    with pytest.raises(BadInput) as caught:
        gather_evidence(evidence, tool_output)
    assert caught.value.field == "evidence" and "evidence" in caught.value.message


def test_a_transcripts_tool_outputs_before_the_answer_for_a_trusting_client() -> None:
    response = (
        "<snippet id=FAKE>I wrote this myself</snippet>"
        "<tool_output><snippet id=S1>real search result</snippet></tool_output>"
        "<answer><tool_output><snippet id=S2>in the answer</snippet></tool_output></answer>"
    )
    assert harvest_snippets(tool_outputs_before_answer(response)) == {"S1": "real search result"}


def test_harvesting_is_linear_on_hostile_input() -> None:
    assert harvest_snippets("<snippet id=A>x " * 100_000) == {}
    assert harvest_snippets("<snippet id=A " * 100_000) == {}
