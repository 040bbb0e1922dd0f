"""Read the claims of an answer: the ``<answer>`` block, its citation tags and the text between.

Two tag grammars are accepted, both with ``id=`` or ``ids=``, quoted (``"…"``, ``'…'``) or
unquoted ids, and comma lists with or without spaces (``id=a,b``, ``id=a, b``, ``id="a, b"``):

- the seed models': ``<answer>… <snippet id=A,B>claim</snippet> …</answer>``;
- DR Tulu's: ``<answer>… <cite id="A,B">claim</cite> …</answer>`` (its system prompt's own
  example writes ``<cite ids="S_p0Zr41Q,S_GxA2ZLh">``, which DR Tulu's regex never matched).

Claims are read **only from the final answer block**, so citations in the reasoning or in
tool calls count for nothing. The tags are found by one linear scan that knows only opening
and closing citation tags: any other ``<`` or ``>`` (``p < 0.05``, ``a -> b``) is claim text,
where DR Tulu's ``[^<]+`` dropped the claim. Claims are kept in a list, so two identical
sentences are two claims (DR Tulu's dict collapsed them), and every id of a multi-id
citation is kept (DR Tulu's ``claims[text] = [citation_id]`` in a loop kept only the last).
An id list that cannot be read whole (``id=S1 S2``) is a format problem (``unreadable_ids``)
in the details, never an id dropped unseen.

Text of the answer outside citation tags is split into sentences by a segmenter
(``tribunal.citation.segment``; a hard-wrapped or tabulated fact is one sentence, not
fragments too short to count): the *uncited* claims, which need a citation when they
assert anything (DR Tulu counts those against recall).

Adapted in behaviour (not in code) from rlresearch/dr-tulu@6188f34,
``rl/open-instruct/open_instruct/search_rewards/utils/citation_utils.py``
(``extract_claims_and_corresponding_citation_ids``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from tribunal.citation.segment import sentences

CitationTag = Literal["snippet", "cite"]

_ANSWER_OPEN = re.compile(r"<answer\s*>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer\s*>", re.IGNORECASE)
# Where a citation tag may start; what follows is read by ``_read_head`` (bounded, linear).
_TAG_START = re.compile(r"<(/?)(snippet|cite)(?![\w-])", re.IGNORECASE)
_CLOSE_REST = re.compile(r"\s*>")
# One attribute of a tag head: a name, then optionally ``=`` and a quoted or bare value.
# Name characters, spaces, '=', quotes and value characters are disjoint classes at each
# step, so a match never backtracks.
_ATTRIBUTE = re.compile(
    r"\s*(?P<name>[\w:.-]+)(?:\s*=\s*(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'"
    r"|(?P<bare>[^\s\"',]+(?:\s*,\s*[^\s\"',]+)*(?:\s*,)?)))?"
)
ID_ATTRIBUTES = frozenset({"id", "ids"})
"""The only attribute names a citation tag may carry; any other one (``url=``, ``note=``) is
refused by name (the ``unknown_attribute`` problem fails the format gate), so that no text
of the answer hides in a tag where no claim is read."""
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
MIN_UNCITED_WORDS = 2
"""An uncited fragment with fewer words (``In summary,``, ``**Incidence**``) is not a claim;
nor is a heading (a line opened by ``#`` or ended by ``:``)."""
_HEADING = re.compile(r"^\s*(?:#.*|[^.!?]*:\s*[*_]*)$")


@dataclass(frozen=True)
class Claim:
    """One claim of an answer.

    Attributes:
        text: The claim's text, stripped (markdown and any ``<``/``>`` kept).
        ids: The ids it cites, in order, each once ('' and repeats dropped); () if uncited.
        tag: ``snippet`` or ``cite`` for a cited claim, None for an uncited sentence.
    """

    text: str
    ids: tuple[str, ...] = ()
    tag: CitationTag | None = None

    @property
    def is_cited(self) -> bool:
        """Whether the claim carries a citation tag (with at least one id)."""
        return bool(self.ids)


@dataclass(frozen=True)
class TagProblem:
    """A malformed citation tag: what is wrong and where (character offset in the answer).

    ``unreadable_ids``: the tag's id list holds something that is neither a comma nor an id
    (``id=S1 S2``, ``id=["S1"]``, ``id="S 1"``, a second ``id=``); the ids read from it are
    kept, and the problem fails the format gate rather than an id being dropped unseen.
    ``unknown_attribute``: the tag carries an attribute other than ``id`` / ``ids``.
    """

    kind: Literal[
        "nested",
        "unclosed",
        "unopened",
        "mismatched",
        "empty_ids",
        "empty_claim",
        "unreadable_ids",
        "unknown_attribute",
    ]
    offset: int


@dataclass(frozen=True)
class ParsedAnswer:
    """What :func:`parse_answer` found in a response.

    Attributes:
        answer: The text of the final answer block, or None when the response has none.
        answer_blocks: How many ``<answer>`` openings the response has.
        answer_closed: Whether the final block has its ``</answer>``.
        claims: Cited claims and uncited sentences, in reading order.
        problems: Malformed citation tags of the answer (empty: well formed).
    """

    answer: str | None
    answer_blocks: int
    answer_closed: bool
    claims: list[Claim] = field(default_factory=list)
    problems: list[TagProblem] = field(default_factory=list)

    @property
    def cited_claims(self) -> list[Claim]:
        """The claims with a citation."""
        return [c for c in self.claims if c.is_cited]


def split_ids(raw: str) -> tuple[str, ...]:
    """Split an id attribute value: commas, optional spaces, each id once, order kept.

    Linear in ``raw`` (a dict keeps the first occurrence of each id).

    Examples:
        >>> split_ids("S_p0Zr41Q, S_GxA2ZLh,S_p0Zr41Q")
        ('S_p0Zr41Q', 'S_GxA2ZLh')
    """
    parts = (part.strip().strip("\"'").strip() for part in raw.split(","))
    return tuple(dict.fromkeys(cid for cid in parts if cid))


def find_answer(response: str) -> tuple[str | None, int, bool]:
    """Return (text of the final answer block, number of blocks, whether it is closed).

    The final block is the one opened last; an unclosed one runs to the end of the response.
    """
    openings = list(_ANSWER_OPEN.finditer(response))
    if not openings:
        return None, 0, False
    start = openings[-1].end()
    close = _ANSWER_CLOSE.search(response, start)
    if close is None:
        return response[start:], len(openings), False
    return response[start : close.start()], len(openings), True


def parse_answer(response: str) -> ParsedAnswer:
    """Parse ``response``'s final answer block into claims (linear time).

    Args:
        response: The whole completion (reasoning, tool calls and the answer block).

    Returns:
        The answer, its claims and its tag problems. No answer block: ``answer`` None and no
        claims (the caller scores it 0).

    Examples:
        >>> parsed = parse_answer('<answer>X is 3 <cite ids="a, b">p < 0.05 here</cite></answer>')
        >>> parsed.cited_claims
        [Claim(text='p < 0.05 here', ids=('a', 'b'), tag='cite')]
    """
    answer, blocks, closed = find_answer(response)
    if answer is None:
        return ParsedAnswer(None, 0, False)
    claims, problems = _scan(answer)
    return ParsedAnswer(answer, blocks, closed, claims, problems)


@dataclass(frozen=True)
class _Tag:
    """One citation tag found by :func:`_tags`: an opening with its ids, or a closing."""

    name: str
    start: int
    end: int
    is_open: bool
    ids: tuple[str, ...] = ()
    problem: Literal["unreadable_ids", "unknown_attribute"] | None = None


def _tags(answer: str) -> list[_Tag]:
    """The citation tags of ``answer`` in order, in one pass.

    An opening tag runs from ``<cite`` / ``<snippet`` to the first ``>`` and holds no ``<``;
    anything else there is claim text. The
    positions of the next ``>`` and ``<`` are found once for every tag start before them,
    so the scan is linear in the answer whatever its tags (an unclosed tag with a long
    unquoted id included).
    """
    tags: list[_Tag] = []
    next_gt = next_lt = -1
    for start in _TAG_START.finditer(answer):
        name = start.group(2).lower()
        if start.group(1):
            close = _CLOSE_REST.match(answer, start.end())
            if close is not None:
                tags.append(_Tag(name, start.start(), close.end(), is_open=False))
            continue
        if next_gt < start.end():
            next_gt = answer.find(">", start.end())
            next_gt = len(answer) if next_gt < 0 else next_gt
        if next_lt < start.end():
            next_lt = answer.find("<", start.end())
            next_lt = len(answer) if next_lt < 0 else next_lt
        if next_gt == len(answer) or next_lt < next_gt:
            continue
        ids, problem = _read_head(answer[start.end() : next_gt])
        tags.append(_Tag(name, start.start(), next_gt + 1, True, ids, problem))
    return tags


def _read_head(
    head: str,
) -> tuple[tuple[str, ...], Literal["unreadable_ids", "unknown_attribute"] | None]:
    """The ids of an opening tag's attributes (``head``: what follows its name, up to
    ``>``), and its problem: an attribute other than ``id`` / ``ids``, or anything that is
    not an attribute (linear: each attribute is one non-backtracking match)."""
    ids: tuple[str, ...] = ()
    seen_id = unreadable = unknown = False
    position = 0
    stripped = head.rstrip().removesuffix("/")
    while position < len(stripped):
        match = _ATTRIBUTE.match(stripped, position)
        if match is None or match.end() == position:
            unreadable = True
            break
        position = match.end()
        raw = next((v for v in match.group("dq", "sq", "bare") if v is not None), None)
        if raw is None:  # a bare word: ``id=A B`` is one unreadable list, not ``B``
            unreadable = True
        elif match.group("name").lower() not in ID_ATTRIBUTES:
            unknown = True
        elif seen_id:
            unreadable = True
        else:
            seen_id = True
            ids = split_ids(raw)
            unreadable = unreadable or any(any(c.isspace() for c in cid) for cid in ids)
    if stripped[position:].strip():
        unreadable = True
    if unreadable and ids:
        return ids, "unreadable_ids"
    return ids, "unknown_attribute" if unknown else None


def _scan(answer: str) -> tuple[list[Claim], list[TagProblem]]:
    """One pass over the tags of ``answer``: claims in order, and what is malformed."""
    claims: list[Claim] = []
    problems: list[TagProblem] = []
    open_tag: _Tag | None = None
    inner: list[_Tag] = []  # tags nested in the open one: their text stays in its claim
    text_start = 0  # where the current uncited text run begins
    for tag in _tags(answer):
        if tag.is_open:
            if open_tag is not None:
                problems.append(TagProblem("nested", tag.start))
                inner.append(tag)
                continue
            claims += _uncited(answer[text_start : tag.start])
            open_tag = tag
            continue
        if open_tag is None:
            problems.append(TagProblem("unopened", tag.start))
            continue
        if tag.name != open_tag.name:
            problems.append(TagProblem("mismatched", tag.start))
        claim = _cited(_without(answer, open_tag.end, tag.start, inner), open_tag, problems)
        if claim is not None:
            claims.append(claim)
        open_tag, inner = None, []
        text_start = tag.end
    if open_tag is not None:
        problems.append(TagProblem("unclosed", open_tag.start))
        claims += _uncited(_without(answer, open_tag.end, len(answer), inner))
    else:
        claims += _uncited(answer[text_start:])
    return claims, problems


def _without(answer: str, start: int, end: int, tags: list[_Tag]) -> str:
    """``answer[start:end]`` with the given tags inside it replaced by a space."""
    parts, position = [], start
    for tag in tags:
        parts += [answer[position : tag.start], " "]
        position = tag.end
    parts.append(answer[position:end])
    return "".join(parts)


def _cited(text: str, opening: _Tag, problems: list[TagProblem]) -> Claim | None:
    if opening.problem is not None:
        problems.append(TagProblem(opening.problem, opening.start))
    text = text.strip()
    if not opening.ids:
        problems.append(TagProblem("empty_ids", opening.start))
        return Claim(text) if text else None
    if not text:
        problems.append(TagProblem("empty_claim", opening.start))
        return None
    tag: CitationTag = "cite" if opening.name == "cite" else "snippet"
    return Claim(text, opening.ids, tag)


def _uncited(text: str) -> list[Claim]:
    """Split text outside citation tags into sentences (``tribunal.citation.segment``: a
    segmenter, not line breaks) and keep those that can assert something."""
    return [
        Claim(sentence)
        for sentence in sentences(text)
        if len(_WORD.findall(sentence)) >= MIN_UNCITED_WORDS and not _HEADING.match(sentence)
    ]


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (letters and digits; punctuation dropped)."""
    return [w.lower() for w in _WORD.findall(text)]
