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

import hashlib
import re
from collections.abc import Iterable

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
    r"<\|[^|<>\[\]\s]{1,64}\|>",
    # DeepSeek's full-width bars (<｜User｜>, <｜end▁of▁sentence｜>).
    r"<\uff5c[^\uff5c<>\[\]\s]{1,64}\uff5c>",
)
"""Regular expressions of whole control-token families, each starting with one literal
character (the mark goes after it). Their inner text holds no ``<`` or ``[``, so no other
token can start inside one of their matches."""


class ControlTokens:
    """Breaks and restores the control tokens of chat templates in untrusted text.

    Args:
        tokens: Control tokens beyond the common families' (the served model's special and
            added tokens: from its tokenizer, or named by the deployment). Tokens shorter
            than two characters, or starting with :data:`MARK`, are ignored.

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
            and not t.startswith(MARK)
            and t not in COMMON_CONTROL_TOKENS
            and not any(re.fullmatch(p, t) for p in COMMON_CONTROL_PATTERNS)
        }
        self.tokens: tuple[str, ...] = tuple(sorted(extra))
        """The tokens beyond the common families', sorted."""
        literals = sorted({*COMMON_CONTROL_TOKENS, *self.tokens}, key=lambda t: (-len(t), t))
        # Each alternative is "first character, any marks, the rest": the marks make a token
        # that is already marked count too, which is what makes the change reversible.
        parts = [(re.escape(t[0]), re.escape(t[1:])) for t in literals]
        families = [_split(p) for p in COMMON_CONTROL_PATTERNS]
        alternatives = [*families, *parts]
        mark = re.escape(MARK)
        self._raw = re.compile("|".join(f"{first}{rest}" for first, rest in alternatives))
        self._marked = re.compile("|".join(f"{first}{mark}*{rest}" for first, rest in alternatives))
        self._restorable = re.compile(
            "|".join(f"{first}{mark}+{rest}" for first, rest in alternatives)
        )
        self._firsts = tuple(sorted({t[0] for t in literals} | {"<"}))
        """Every token starts with one of these: a text without them is returned at C speed,
        and only their positions are tried (a regex scan of a whole text costs ~20 ns/char)."""
        self._may_overlap = _may_overlap(literals, self._firsts)
        """Whether a token can start inside another's match (then one pass may leave one)."""

    def neutralise(self, text: str) -> str:
        """Return ``text`` with a :data:`MARK` after the first character of every control
        token (marked ones included); the result holds no control token."""
        for first in self._firsts:
            if first in text:
                break
        else:
            return text  # the common case: one C-speed scan per first character
        spans = self._spans(text, self._marked)
        if not spans:
            return text
        pieces: list[str] = []
        last = 0
        for start, _ in spans:
            pieces += [text[last : start + 1], MARK]
            last = start + 1
        pieces.append(text[last:])
        out = "".join(pieces)
        # Tokens that overlap each other (a custom tokenizer's) can hide one inside another
        # match; break whatever is left. Each pass breaks one and creates none.
        while self._may_overlap and (found := self._spans(out, self._raw, first_only=True)):
            start = found[0][0]
            out = out[: start + 1] + MARK + out[start + 1 :]
        return out

    def _spans(
        self, text: str, pattern: re.Pattern[str], first_only: bool = False
    ) -> list[tuple[int, int]]:
        """Leftmost non-overlapping matches of ``pattern`` (as ``re.sub`` takes them), tried
        only where a token's first character occurs."""
        found: list[tuple[int, int]] = []
        for first in self._firsts:
            pos = text.find(first)
            while pos >= 0:
                match = pattern.match(text, pos)
                if match is not None:
                    found.append(match.span())
                pos = text.find(first, pos + 1)
        if len(found) < 2:
            return found
        # Matches may overlap (a token inside another's match): keep the leftmost of each.
        spans: list[tuple[int, int]] = []
        end = 0
        for start, stop in sorted(found):
            if start >= end:
                spans.append((start, stop))
                if first_only:
                    break
                end = stop
        return spans

    def restore(self, text: str) -> str:
        """Undo :meth:`neutralise` (exact for token sets that do not overlap each other)."""
        return self._restorable.sub(lambda m: m.group(0)[0] + m.group(0)[2:], text)

    def find_raw(self, text: str) -> list[str]:
        """Return every control token ``text`` holds unbroken, in order (for tests and
        checks)."""
        return [m.group(0) for m in self._raw.finditer(text)]


def _may_overlap(literals: Iterable[str], firsts: tuple[str, ...]) -> bool:
    """Whether a token can start inside the match of another, so that breaking the outer one
    leaves it whole.

    A token starts with one of ``firsts``, so only those characters at offset >= 1 of a
    literal matter: there, another literal that agrees with the rest of it, or the opening
    of a family (``<|``, ``<｜``, or a ``<`` that the following text could continue), can
    start. The families' inner text holds neither ``<`` nor ``[``, so a first character
    other than those two could start a token inside a family's match.
    """
    literals = list(literals)
    if set(firsts) - {"<", "["}:
        return True
    for outer in literals:
        for i in range(1, len(outer)):
            if outer[i] not in firsts:
                continue
            rest = outer[i:]
            if rest == "<" or rest[:2] in ("<|", "<\uff5c"):
                return True
            if any(t.startswith(rest) or rest.startswith(t) for t in literals):
                return True
    return False


def _split(pattern: str) -> tuple[str, str]:
    """Split a family pattern into its first literal character and the rest."""
    first = pattern[:2] if pattern.startswith("\\") else pattern[0]
    return first, pattern[len(first) :]


def fence_tag(*texts: str) -> str:
    """Return a fence code that occurs in none of ``texts`` (deterministic for given texts).

    Args:
        texts: Every untrusted text the fence will enclose.

    Returns:
        Eight or more lowercase hex digits, e.g. ``"3f9a01c2"``.
    """
    # The seed only makes the tag deterministic; the loop below is what makes it safe, so
    # a plain join does (two splits of one text may share a seed, never an unsafe tag).
    root = hashlib.sha256("\x00".join(texts).encode("utf-8", "surrogatepass")).hexdigest()
    for salt in range(1000):
        tag = hashlib.sha256(f"{root}:{salt}".encode()).hexdigest()[: 8 + salt // 100]
        for text in texts:
            if tag in text:
                break
        else:
            return tag
    raise AssertionError("no fence tag found")  # pragma: no cover - needs ~2^32 collisions


def one_line(text: str) -> str:
    """Return ``text`` on one line: every run of whitespace (line breaks included) one space.

    For text that sits in a record that is one line long (a snippet's line, an id).
    """
    return " ".join(text.split())
