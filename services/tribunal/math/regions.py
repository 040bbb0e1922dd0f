"""Parse a completion into regions and return its final answer region.

What is graded must be a defined string, not whatever a search of the prose finds first.
Before any answer is looked for, a completion is cut by its structure:

- **turns**: the policy's own chat template ends its turn at its end-of-turn marker; text
  after the first marker of *that* template (``<|im_end|>`` / ``<|im_start|>`` for
  ``chatml``, ``<|eot_id|>`` / ``<|start_header_id|>`` for ``llama3``,
  ``<end_of_turn>`` / ``<start_of_turn>`` for ``gemma``) is a turn the policy typed for
  someone else, never its answer. Markers of other families are plain text.
- **reasoning**: text up to the last ``</think>`` is a reasoning block (drafts); a
  ``<think>`` never closed leaves no final region (no answer).
- **fenced code** (a ```` ``` ```` or ``~~~`` fence to its closing fence, or to the end),
  **HTML comments** (``<!-- ... -->``), **LaTeX comments** (``%`` to the end of the line,
  where ``%`` is no percent sign: not after a digit, a digit and a space, a period or a
  backslash), **block quotes** (lines starting ``> ``), **quoted spans** (``"..."`` or
  ``“...”`` within a line, at most 300 characters) and **hypothetical sentences** (one
  holding "hypothetically", "imagine", "suppose", "pretend", "for example", "e.g.", or a
  subjunctive "if it / this / that / I / he / she / the answer / result / value were";
  "if there were ...", "if ... would" are how word problems reason, and stay) are removed:
  a rendered response does not show the first three, and the others state what is not
  being claimed.

What remains is the **final answer region**: the only text an answer is looked for in.
Each removed span is replaced by a newline, so that text on either side never joins.
Every pattern is linear in the text (no nested unbounded repeats).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tribunal.wire.math import ChatTemplate, RegionName

_TURN_MARKERS: dict[str, re.Pattern[str]] = {
    "chatml": re.compile(r"<\|im_(?:end|start)\|>"),
    "llama3": re.compile(r"<\|(?:eot_id|start_header_id|end_header_id)\|>"),
    "gemma": re.compile(r"<(?:end|start)_of_turn>"),
}
_REMOVED = re.compile(
    r"(?P<code>^[ \t]*(?P<fence>`{3,}|~{3,})[^\n]*(?:\n.*?(?:^[ \t]*(?P=fence)[ \t]*$|\Z)|\Z))"
    r"|(?P<html><!--.*?(?:-->|\Z))"
    r"|(?P<latex>(?<![\\\d.])(?<!\d[ \t])%[^\n]*)"
    r"|(?P<quote>^[ \t]*>[ \t][^\n]*|\"[^\"\n]{0,300}\"|“[^”\n]{0,300}”)",
    re.MULTILINE | re.DOTALL,
)
# A sentence: up to a sentence end (".", "!", "?", with the "$", ")" or "]" that close its
# math, before a space or the end) or a line end.
_SENTENCE = re.compile(r"(?:[^\n.!?]|[.!?](?![.!?]|[$)\]*]*(?:\s|\Z)))*(?:[.!?]+[$)\]*]*|\n|\Z)")
_HYPOTHETICAL = re.compile(
    r"\b(?:hypothetical(?:ly)?|imagine|suppose|supposing|pretend|for\s+example|e\.g\.)"
    r"|\bif\s+(?:it|this|that|I|he|she|the\s+(?:answer|result|value))\s+were\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Region:
    """The final answer region of a completion.

    Attributes:
        text: The region's text, removed spans replaced by a newline.
        name: Where it starts (``response`` or ``after_reasoning``).
        removed: The kinds of span removed from it, in order of first appearance
            (``turn``, ``code``, ``html``, ``latex``, ``quote``, ``hypothetical``).
    """

    text: str
    name: RegionName
    removed: tuple[str, ...] = ()


def final_region(response: str, template: ChatTemplate = "chatml") -> Region | None:
    """Return the final answer region of ``response``, or None when it has none.

    Args:
        response: The completion (normalised: ``tribunal.math.normalize``).
        template: The policy's chat template (``none``: no turn markers).

    Returns:
        The region (see the module docstring); None when a ``<think>`` is never closed.

    Examples:
        >>> final_region("<think>\\\\boxed{1}</think> so \\\\boxed{2}").text
        ' so \\\\boxed{2}'
        >>> final_region("\\\\boxed{2}<|im_end|><|im_start|>user Answer: 3").text
        '\\\\boxed{2}'
    """
    removed: list[str] = []
    marker = _TURN_MARKERS.get(template)
    if marker is not None:
        end = marker.search(response)
        if end is not None:
            response = response[: end.start()]
            removed.append("turn")
    name: RegionName = "response"
    close = response.rfind("</think>")
    if close >= 0:
        response = response[close + len("</think>") :]
        name = "after_reasoning"
    elif "<think>" in response:
        return None

    def blank(match: re.Match[str]) -> str:
        kind = next(k for k in ("code", "html", "latex", "quote") if match.group(k) is not None)
        if kind not in removed:
            removed.append(kind)
        return "\n"

    text = _REMOVED.sub(blank, response)
    text = _without_hypotheticals(text, removed)
    return Region(text, name, tuple(removed))


def _without_hypotheticals(text: str, removed: list[str]) -> str:
    """``text`` with its hypothetical sentences replaced by a newline."""
    if _HYPOTHETICAL.search(text) is None:
        return text
    pieces = []
    for sentence in _SENTENCE.finditer(text):
        if sentence.group() and _HYPOTHETICAL.search(sentence.group()):
            pieces.append("\n")
            if "hypothetical" not in removed:
                removed.append("hypothetical")
        else:
            pieces.append(sentence.group())
    return "".join(pieces)
