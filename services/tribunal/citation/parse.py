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

Text of the answer outside citation tags is split into sentences: the *uncited* claims,
some of which need a citation (DR Tulu counts those against recall).

Adapted in behaviour (not in code) from rlresearch/dr-tulu@6188f34,
``rl/open-instruct/open_instruct/search_rewards/utils/citation_utils.py``
(``extract_claims_and_corresponding_citation_ids``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

CitationTag = Literal["snippet", "cite"]

_ANSWER_OPEN = re.compile(r"<answer\s*>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer\s*>", re.IGNORECASE)
# One opening or closing citation tag. The id value is quoted ("…" / '…') or a bare comma
# list, spaces allowed around its commas (``id=S_1, S_2``); ``rest`` holds whatever follows
# up to '>' (further attributes, or something unreadable: see ``_ATTRIBUTES``). Bare ids
# exclude '<', so a failed match stops at the next tag and the scan stays linear.
_BARE_ID = r"[^\s<>\"',]+"
_TAG = re.compile(
    r"<(?P<open>snippet|cite)\s+ids?\s*=\s*"
    r"(?:\"(?P<dq>[^\"]{0,2000})\"|'(?P<sq>[^']{0,2000})'"
    rf"|(?P<bare>{_BARE_ID}(?:\s*,\s*{_BARE_ID})*(?:\s*,)?))(?P<rest>[^>]{{0,500}})>"
    r"|</(?P<close>snippet|cite)\s*>",
    re.IGNORECASE,
)
# What may follow the id value inside a tag: other attributes (``url="…"``), none an id list.
_ATTRIBUTES = re.compile(
    r"(?:\s+(?!ids?\s*=)[\w:.-]+\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'>]+))*\s*/?", re.IGNORECASE
)
# Sentence ends: . ! ? then space and a capital, digit or opening mark, but not after an
# abbreviation ("et al.", "e.g.", "vs.", an initial "S."); and line breaks (bullets).
_SENTENCE_SPLIT = re.compile(
    r"(?<=[.!?])(?<!\bal\.)(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<!\b[A-Z]\.)"
    r"\s+(?=[A-Z0-9*\-\[(\"“])|\n+"
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
MIN_UNCITED_WORDS = 4
"""An uncited fragment with fewer words (``- **Incidence:**``, ``In summary,``) is not a
claim: headings and connectives need no citation."""


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
    """

    kind: Literal[
        "nested", "unclosed", "unopened", "mismatched", "empty_ids", "empty_claim", "unreadable_ids"
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


def readable_ids(ids: tuple[str, ...], rest: str) -> bool:
    """Whether a tag's id list was read whole: no id holds a space, and what follows the id
    value in the tag (``rest``) is only further attributes."""
    return _ATTRIBUTES.fullmatch(rest) is not None and not any(
        any(ch.isspace() for ch in cid) for cid in ids
    )


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


def _scan(answer: str) -> tuple[list[Claim], list[TagProblem]]:
    """One pass over the tags of ``answer``: claims in order, and what is malformed."""
    claims: list[Claim] = []
    problems: list[TagProblem] = []
    open_tag: re.Match[str] | None = None
    text_start = 0  # where the current uncited text run begins
    for tag in _TAG.finditer(answer):
        if tag.group("open"):
            if open_tag is not None:
                problems.append(TagProblem("nested", tag.start()))
                continue  # the inner opening is ignored; its text stays in the outer claim
            claims += _uncited(answer[text_start : tag.start()])
            open_tag = tag
            continue
        if open_tag is None:
            problems.append(TagProblem("unopened", tag.start()))
            continue
        if tag.group("close").lower() != open_tag.group("open").lower():
            problems.append(TagProblem("mismatched", tag.start()))
        claim = _cited(answer, open_tag, tag.start(), problems)
        if claim is not None:
            claims.append(claim)
        open_tag = None
        text_start = tag.end()
    if open_tag is not None:
        problems.append(TagProblem("unclosed", open_tag.start()))
        claims += _uncited(_TAG.sub(" ", answer[open_tag.end() :]))
    else:
        claims += _uncited(answer[text_start:])
    return claims, problems


def _cited(
    answer: str, opening: re.Match[str], end: int, problems: list[TagProblem]
) -> Claim | None:
    raw = opening.group("dq")
    if raw is None:
        raw = opening.group("sq")
    if raw is None:
        raw = opening.group("bare")
    ids = split_ids(raw or "")
    if ids and not readable_ids(ids, opening.group("rest")):
        problems.append(TagProblem("unreadable_ids", opening.start()))
    text = _TAG.sub(" ", answer[opening.end() : end]).strip()  # drop nested inner tags
    if not ids:
        problems.append(TagProblem("empty_ids", opening.start()))
        return Claim(text) if text else None
    if not text:
        problems.append(TagProblem("empty_claim", opening.start()))
        return None
    tag: CitationTag = "cite" if opening.group("open").lower() == "cite" else "snippet"
    return Claim(text, ids, tag)


def _uncited(text: str) -> list[Claim]:
    """Split text outside citation tags into sentences long enough to be claims."""
    out: list[Claim] = []
    for sentence in _SENTENCE_SPLIT.split(text):
        sentence = sentence.strip()
        if len(_WORD.findall(sentence)) >= MIN_UNCITED_WORDS:
            out.append(Claim(sentence))
    return out


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (letters and digits; punctuation dropped)."""
    return [w.lower() for w in _WORD.findall(text)]
