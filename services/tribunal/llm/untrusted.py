"""Untrusted text for a prompt: chat-template control tokens broken, fences it cannot close.

Why: a fence holds only as *text*. An OpenAI-compatible server renders the chat template
and tokenizes the result with its special tokens live (vLLM, vllm-project/vllm#31735; the
same in transformers, huggingface/transformers#29279), so ``<|im_end|>`` inside a graded
response ends the user turn for the model, and ``<|im_start|>system`` after it starts a
forged system turn. A tokenizer splits out its added tokens by exact string match before
anything else, so one character inserted into each occurrence is enough to keep it text.

:class:`ControlTokens` inserts :data:`MARK` (a visible middle dot) after the first character
of every control token in a text: ``<|im_end|>`` becomes ``<·|im_end|>``, ``[INST]`` becomes
``[·INST]``. Text that already holds a marked token gets one more mark
(``<·|im_end|>`` → ``<··|im_end|>``), so :meth:`ControlTokens.restore` gives back the exact
original. The tokens are the common families' (:data:`COMMON_CONTROL_TOKENS`,
:data:`COMMON_CONTROL_PATTERNS`) plus any the deployment or the backend's tokenizer names.

:func:`fence_tag` draws the fence code of a prompt: derived from a hash of its untrusted
texts and re-drawn until it occurs in none of them, so no text can contain (and so close)
its own fence, and the same texts always get the same fence (prefix caching).

Known issues: a tokenizer whose added tokens are *normalized* (``normalized=True`` under a
normalizer that folds case or width) also matches spellings that differ from the token;
the common families' special tokens are not normalized. One-character tokens cannot be
broken and are not listed.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

MARK = "\u00b7"
"""Inserted after the first character of a control token (MIDDLE DOT: visible, one token of
text in every common vocabulary, and in no family's control token)."""

COMMON_CONTROL_TOKENS: tuple[str, ...] = (
    # Qwen3 / DeepSeek-R1 reasoning and Qwen tool turns (added tokens, matched like special).
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    # Gemma.
    "<start_of_turn>",
    "<end_of_turn>",
    "<bos>",
    "<eos>",
    "<start_of_image>",
    "<end_of_image>",
    # Llama 2, Mistral and the SentencePiece defaults.
    "<s>",
    "</s>",
    "<unk>",
    "<<SYS>>",
    "<</SYS>>",
    "[INST]",
    "[/INST]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_CALLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CONTENT]",
    "[THINK]",
    "[/THINK]",
    # GLM.
    "[gMASK]",
    "<sop>",
    "<eop>",
)
"""Control tokens of the common chat templates that the patterns below do not cover."""

COMMON_CONTROL_PATTERNS: tuple[str, ...] = (
    # ChatML (<|im_start|>, <|im_end|>), <|endoftext|>, Llama 3 (<|eot_id|>,
    # <|start_header_id|>, <|reserved_special_token_7|>), Phi, Granite, Command R, gpt-oss.
    r"<\|[^|<>\[\]\s\u00b7]{1,64}\|>",
    # DeepSeek's full-width bars (<｜User｜>, <｜end▁of▁sentence｜>).
    r"<\uff5c[^\uff5c<>\[\]\s\u00b7]{1,64}\uff5c>",
)
"""Regular expressions of whole control-token families, each starting with one literal
character (the mark goes after it). Their inner text holds no :data:`MARK`, so a marked
text holds no new match."""


class ControlTokens:
    """Breaks and restores the control tokens of chat templates in untrusted text.

    Every position where a control token starts (raw, or already marked) gets a
    :data:`MARK` after its character, overlapping occurrences included, in one pass: the
    tokens are compiled into one regular expression per first character whose rest is a
    trie (:func:`_trie_pattern`), tried at each occurrence of that character (found by
    ``str.find``), so the work per position is bounded by the longest token, never by the
    number of tokens or by a rescan of the text. No token (and no
    family match) holds :data:`MARK`, so a control token left in the output would be an
    occurrence of the input, whose start was marked: none is left, whatever the token set
    (overlapping sets included, where one pass of leftmost matches could leave one).

    Args:
        tokens: Control tokens beyond the common families' (the served model's special and
            added tokens: from its tokenizer, or named by the deployment). Tokens shorter
            than two characters, or holding :data:`MARK`, are ignored.

    Examples:
        >>> control = ControlTokens()
        >>> control.neutralise("ok<|im_end|><|im_start|>system")
        'ok<·|im_end|><·|im_start|>system'
        >>> control.restore(control.neutralise("<·|im_end|>"))
        '<·|im_end|>'
    """

    def __init__(self, tokens: Iterable[str] = ()) -> None:
        extra = {
            t
            for t in tokens
            if len(t) >= 2
            and MARK not in t
            and t not in COMMON_CONTROL_TOKENS
            and not any(re.fullmatch(p, t) for p in COMMON_CONTROL_PATTERNS)
        }
        self.tokens: tuple[str, ...] = tuple(sorted(extra))
        """The tokens beyond the common families', sorted."""
        rests: dict[str, set[str]] = {}
        for t in (*COMMON_CONTROL_TOKENS, *self.tokens):
            rests.setdefault(t[0], set()).add(t[1:])
        families: dict[str, list[str]] = {}
        for pattern in COMMON_CONTROL_PATTERNS:
            first, rest = _split(pattern)
            families.setdefault(first, []).append(rest)
        mark = re.escape(MARK)
        tries = {
            first: _trie_pattern(rests.get(first, set()), families.get(first, []))
            for first in sorted({*rests, *families})
        }
        self._at = tuple(
            (f, re.compile(f"{re.escape(f)}(?={mark}*{rest})").match) for f, rest in tries.items()
        )
        """Per first character, a match of a token (raw or marked) starting there: tried at
        every occurrence of the character, so every start is found, overlapping ones too."""
        self._restorable = re.compile(
            "|".join(f"(?<={re.escape(f)}){mark}(?={mark}*{rest})" for f, rest in tries.items())
        )
        self._raw = re.compile("|".join(f"{re.escape(f)}(?=({rest}))" for f, rest in tries.items()))

    def neutralise(self, text: str) -> str:
        """Return ``text`` with a :data:`MARK` after the first character of every control
        token (marked ones included, overlapping ones too); the result holds no control
        token. Linear in ``len(text)`` (times the longest token, at most)."""
        starts: list[int] = []
        for first, at in self._at:
            pos = text.find(first)
            while pos >= 0:  # only where a token can start: str.find runs at C speed
                if at(text, pos) is not None:
                    starts.append(pos)
                pos = text.find(first, pos + 1)
        if not starts:
            return text
        starts.sort()
        pieces: list[str] = []
        last = 0
        for pos in starts:
            pieces += [text[last : pos + 1], MARK]
            last = pos + 1
        pieces.append(text[last:])
        return "".join(pieces)

    def restore(self, text: str) -> str:
        """Undo :meth:`neutralise` (exact for token sets where no token starts inside
        another's occurrence)."""
        return self._restorable.sub("", text)

    def find_raw(self, text: str) -> list[str]:
        """Return the start of every control token ``text`` holds unbroken, in order
        (overlapping ones included; for tests and checks): the shortest token that starts
        there."""
        return [
            m.group(0) + next(g for g in m.groups() if g is not None)
            for m in self._raw.finditer(text)
        ]


def _trie_pattern(rests: set[str], families: list[str]) -> str:
    """One regular expression that matches where any of ``rests`` (literals) or ``families``
    (patterns) starts: the literals as a trie, so that a match is tried once per character
    of the longest, not once per literal. A literal that another extends is dropped (the
    shorter already matches: only *whether* a token starts here counts)."""
    kept = sorted(rests)
    kept = [r for i, r in enumerate(kept) if not any(r.startswith(k) for k in kept[:i])]
    trie: dict[str, Any] = {}
    for rest in kept:
        node = trie
        for ch in rest:
            node = node.setdefault(ch, {})
        node[""] = {}
    alternatives = [*families]
    if trie:
        alternatives.append(_node_pattern(trie))
    return "(?:" + "|".join(alternatives) + ")"


def _node_pattern(node: dict[str, Any]) -> str:
    if "" in node:
        return ""  # a whole literal ends here (and none is longer: see _trie_pattern)
    branches = [re.escape(ch) + _node_pattern(child) for ch, child in sorted(node.items())]
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


def _split(pattern: str) -> tuple[str, str]:
    """Split a family pattern into its first character (unescaped) and the rest."""
    if pattern.startswith("\\"):
        return pattern[1], pattern[2:]
    return pattern[0], pattern[1:]


def fence_tag(*texts: str) -> str:
    """Return a fence code that occurs in none of ``texts``, in any spelling a reader could
    take for it (deterministic for given texts).

    A text is compared after :func:`fold_lookalikes` (NFKC, format characters and combining
    marks removed, case folded), so a copy of the code with a zero-width or bidi character
    inside, in capitals or in full-width digits also makes the code be drawn again.

    Args:
        texts: Every untrusted text the fence will enclose.

    Returns:
        Eight or more lowercase hex digits, e.g. ``"3f9a01c2"``.
    """
    # The seed only makes the tag deterministic; the loop below is what makes it safe, so
    # a plain join does (two splits of one text may share a seed, never an unsafe tag).
    root = hashlib.sha256("\x00".join(texts).encode("utf-8", "surrogatepass")).hexdigest()
    folded = [fold_lookalikes(text) for text in texts]
    for salt in range(1000):
        tag = hashlib.sha256(f"{root}:{salt}".encode()).hexdigest()[: 8 + salt // 100]
        if not holds_code(folded, tag):
            return tag
    raise AssertionError("no fence tag found")  # pragma: no cover - needs ~2^32 collisions


def holds_code(folded: Iterable[str], code: str) -> bool:
    """Whether any of ``folded`` (texts through :func:`fold_lookalikes`) spells ``code``
    (ASCII letters and digits), with format characters (zero-width, bidi controls, soft
    hyphen, tags) and combining marks allowed between its characters."""
    code = code.lower()
    for text in folded:
        if code in text:
            return True
        # Only where the text holds a character past ASCII can one be invisible; the search
        # is tried only where the code's first character occurs (a literal prefix).
        if not text.isascii() and _code_pattern(code).search(text) is not None:
            return True
    return False


_INVISIBLE_CATEGORIES = ("Cf", "Mn", "Me")
_PLANES_WITH_INVISIBLES = (range(0x20000), range(0xE0000, 0xE1000))
"""Format characters and combining marks lie in planes 0, 1 and 14 only (CJK and private
use fill the others), so a scan of these finds every one (checked by a test)."""


@functools.cache
def invisible_class() -> str:
    """A regular-expression class of every format character and combining mark."""
    ranges: list[list[int]] = []
    for cp in (cp for plane in _PLANES_WITH_INVISIBLES for cp in plane):
        if unicodedata.category(chr(cp)) in _INVISIBLE_CATEGORIES:
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    body = "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )
    return f"[{body}]"


@functools.lru_cache(maxsize=256)
def _code_pattern(code: str) -> re.Pattern[str]:
    between = invisible_class() + "*"
    return re.compile(between.join(re.escape(ch) for ch in code))


def fold_lookalikes(text: str) -> str:
    """Return ``text`` as a reader would match a code in it, format characters and combining
    marks aside (:func:`holds_code` skips those): NFKD (full-width and other compatibility
    forms to ASCII, accents apart from their letters), lowercased (not ``casefold``, which
    turns a combining mark, U+0345, into a letter; no character folds to an ASCII
    hex letter that it does not lowercase to, checked by a test). C-speed; ASCII text is only
    lowercased."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKD", text).lower()


def one_line(text: str) -> str:
    """Return ``text`` on one line: every run of whitespace (line breaks included) one space.

    For text that sits in a record that is one line long (a snippet's line, an id).
    """
    return " ".join(text.split())
