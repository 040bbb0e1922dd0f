"""The evidence an answer may cite: ``{id: snippet text}``, from the request only.

It comes from two fields of the item, merged in this order (a later source never overwrites
an id):

1. the item's structured ``evidence`` map;
2. the item's raw ``tool_output`` (all of it).

In raw text, snippets are ``<snippet id=…>text</snippet>``, ``<snippets id=…>text</snippets>``
or ``<webpage id=…>text</webpage>``, with quoted or unquoted ids (DR Tulu's
``format_utils.extract_citations_from_context``, rlresearch/dr-tulu@6188f34, harvests the
same three tags).

The response being scored is never a source: a ``<tool_output>`` block in it may have been
typed by the policy, which would then cite sources it wrote. Only the caller (the trainer,
which knows which tokens the environment inserted) can say what the tool returned;
:func:`tool_outputs_before_answer` helps a caller that holds a transcript it trusts build
``tool_output`` from it. An item with no snippet in its request is refused (``bad_input``
naming ``evidence``), never scored against itself.
"""

from __future__ import annotations

import re

from tribunal.wire.errors import BadInput

_SNIPPET_OPEN = re.compile(
    r"<(?P<tag>snippets?|webpage)\s+ids?\s*=\s*"
    r"(?:\"(?P<dq>[^\"]{0,2000})\"|'(?P<sq>[^']{0,2000})'|(?P<bare>[^\s>\"']{1,2000}))[^>]{0,500}>",
    re.IGNORECASE,
)
_ANSWER_OPEN = re.compile(r"<answer\s*>", re.IGNORECASE)


def harvest_snippets(text: str) -> dict[str, str]:
    """Return ``{id: text}`` for every snippet, snippets or webpage tag of ``text``.

    The first occurrence of an id wins (a search that returns the same document twice gives
    the same text); texts are stripped.

    Examples:
        >>> harvest_snippets('<snippet id="S1">A cat.</snippet><webpage id=W2>Dogs</webpage>')
        {'S1': 'A cat.', 'W2': 'Dogs'}
    """
    out: dict[str, str] = {}
    position = 0
    unclosed: set[str] = set()  # tags with no closing left: later openings cannot close
    while (match := _SNIPPET_OPEN.search(text, position)) is not None:
        position = match.end()
        closing = f"</{match.group('tag').lower()}>"
        end = -1 if closing in unclosed else text.find(closing, match.end())
        if end < 0:  # an unclosed snippet holds no text we can delimit
            unclosed.add(closing)
            continue
        raw = match.group("dq")
        if raw is None:
            raw = match.group("sq")
        if raw is None:
            raw = match.group("bare")
        sid = (raw or "").strip()
        if sid and sid not in out:
            out[sid] = text[match.end() : end].strip()
        position = end + len(closing)
    return out


def tool_outputs_before_answer(response: str) -> str:
    """Return the ``<tool_output>`` blocks of ``response`` before its final answer block.

    For a client that holds a transcript whose tool outputs it trusts (the environment
    inserted them), to pass as an item's ``tool_output``; the verifier never calls it on the
    response it scores. An unclosed block runs to the answer (a transcript cut short). Plain
    ``str.find``: a lazy ``.*?`` regex over 25 kB transcripts cost a millisecond per response.
    """
    openings = list(_ANSWER_OPEN.finditer(response))
    head = response[: openings[-1].start()] if openings else response
    blocks: list[str] = []
    position = 0
    while (start := head.find("<tool_output>", position)) >= 0:
        start += len("<tool_output>")
        end = head.find("</tool_output>", start)
        blocks.append(head[start : end if end >= 0 else len(head)])
        if end < 0:
            break
        position = end
    return "\n".join(blocks)


def gather_evidence(
    evidence: dict[str, str] | None = None, tool_output: str | None = None
) -> dict[str, str]:
    """Return the evidence of one item from its request fields (see the module docstring).

    Args:
        evidence: Structured ``{id: text}``, or None.
        tool_output: Raw search-tool output holding snippet tags, or None.

    Returns:
        ``{id: text}``, never empty.

    Raises:
        BadInput: (field ``evidence``) neither field holds a snippet.
    """
    out: dict[str, str] = {k.strip(): v for k, v in (evidence or {}).items() if k.strip()}
    if tool_output is not None:
        for sid, text in harvest_snippets(tool_output).items():
            out.setdefault(sid, text)
    if not out:
        raise BadInput(
            "evidence: the request holds no snippet to cite (send evidence {id: text} or a "
            "tool_output with <snippet id=…> tags); snippets are never read from the response",
            field="evidence",
        )
    return out
