"""Keys of the judge's in-process LRU of verdicts (``JudgeVerifier.cache``), by what decides one.

Key (``tribunal.llm.keys.judgment_key``, canonical JSON shared with the citation judge):
(judge model, prompt version and digest, backend settings that move a verdict, rubrics per
call, question, response) as one response key, then (response key, rubric text, polarity,
the rubrics asked in the same call): an item's rubrics are asked in fixed chunks of
``rubrics_per_call`` in order, so a verdict is reused only where the same rubrics shared
its call.
Only readable verdicts are stored; errors never are. The core's result cache sits above this
one and holds whole items; this one also serves rubrics shared between items (static sets, GRPO
groups whose completions repeat) and items whose other rubrics changed.
"""

from __future__ import annotations

from collections.abc import Sequence

from tribunal.llm.keys import judgment_key


def response_digest(context: str, question: str, response: str) -> str:
    """Return the key of everything shared by the rubrics of one response."""
    return judgment_key(
        "rubric_response", {"context": context, "question": question, "response": response}
    )


def call_digest(call: Sequence[tuple[str, str]]) -> str:
    """Return the key of the rubrics asked in one call: (text, polarity) of each, in order
    (with several rubrics per call, the others are part of what the judge read, and can move
    each verdict)."""
    return judgment_key("rubric_call", {"rubrics": [list(pair) for pair in call]})


def verdict_key(response_key: str, rubric_text: str, polarity: str, call: str = "") -> str:
    """Return the cache key of one rubric of one response.

    Args:
        response_key: :func:`response_digest`'s.
        rubric_text: The rubric's text.
        polarity: Its polarity.
        call: :func:`call_digest` of the rubrics asked in its call.
    """
    return judgment_key(
        "rubric",
        {"response": response_key, "polarity": polarity, "text": rubric_text, "call": call},
    )
