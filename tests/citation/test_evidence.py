"""Evidence: structured maps, raw tool output, and the response's own tool outputs."""

from __future__ import annotations

from tribunal.citation.evidence import gather_evidence, harvest_snippets


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
        "<answer>x</answer>",
        {"S1": "given"},
        "<snippet id=S1>raw</snippet><snippet id=S2>b</snippet>",
    )
    assert evidence == {"S1": "given", "S2": "b"}


def test_without_inputs_only_tool_outputs_before_the_answer_count() -> None:
    response = (
        "<snippet id=FAKE>I wrote this myself</snippet>"
        "<tool_output><snippet id=S1>real search result</snippet></tool_output>"
        "<answer><snippet id=S2>a claim in the seed grammar</snippet></answer>"
    )
    assert gather_evidence(response) == {"S1": "real search result"}


def test_given_inputs_stop_harvesting_from_the_response() -> None:
    response = "<tool_output><snippet id=S1>x</snippet></tool_output><answer>y</answer>"
    assert gather_evidence(response, evidence={}) == {}


def test_harvesting_is_linear_on_hostile_input() -> None:
    assert harvest_snippets("<snippet id=A>x " * 100_000) == {}
    assert harvest_snippets("<snippet id=A " * 100_000) == {}
