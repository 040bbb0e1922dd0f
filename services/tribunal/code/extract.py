"""Take the program out of a policy's raw completion: the last fenced block of its language.

A code item may send the policy's whole completion as ``response`` instead of the program as
``code``. The program is then the **last** fenced block (```` ``` ````) labelled with the
item's language, as open-instruct (``CodeVerifier.extract_python_code`` in
``open_instruct/ground_truth_utils.py``: the last match of ```` ```(?:python)?(.*?)``` ````)
and verl (``prime_code.compute_score``: ``completion.split("```python")[-1]``) take it:
models that revise their answer put the final version last.

Rules (stricter than both, so that prose never runs as code):

- Text up to the last ``</think>`` is reasoning and is skipped (verl removes
  ``<think>…</think>``; open-instruct keeps what follows ``</think>``).
- A block opens with a line of three or more backticks (up to three spaces of indent)
  followed by an optional label, and closes with a line of at least as many backticks. A
  fence that never closes (a completion cut off at ``max_tokens``) is no block.
- Labels: ``python``, ``python3``, ``py`` for Python; ``cpp``, ``c++``, ``cxx``, ``cc`` for
  C++ (case-insensitive). The last block with one of the item's labels wins; when there is
  none, the last **unlabelled** block; blocks labelled with another language never run.
- No block at all (bare code, prose only, another language only) is the completion's fault:
  the item gets reward 0 with the reason, never an error of the service. Both anchors run
  the whole completion in that case; sending bare code is what ``code`` is for.

Known issues: a completion whose last block of its language is a usage example
(``sol = Solution(); print(...)``) after the solution gets that example run (it then fails
for lack of the solution), as with open-instruct and verl.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LANGUAGE_LABELS: dict[str, frozenset[str]] = {
    "python": frozenset({"python", "python3", "py"}),
    "cpp": frozenset({"cpp", "c++", "cxx", "cc"}),
}
"""Fence labels that mark a block as the item's language."""

_FENCE = re.compile(
    r"^[ ]{0,3}(?P<fence>`{3,})[ \t]*(?P<label>[^\s`]*)[^\n`]*\n"
    r"(?P<body>.*?)"
    r"^[ ]{0,3}(?P=fence)`*[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_THINK_END = "</think>"


@dataclass(frozen=True)
class Extraction:
    """What extraction found.

    Attributes:
        code: The program, or None when the completion holds no usable block.
        reason: Why there is no program (None when ``code`` is set).
    """

    code: str | None
    reason: str | None = None


def extract_program(response: str, language: str) -> Extraction:
    """Return the last fenced block of ``language`` in ``response`` (see the module rules).

    Args:
        response: The policy's whole completion.
        language: ``python`` or ``cpp`` (the item's normalised language).

    Returns:
        ``Extraction(code=...)`` with the block's text, or ``Extraction(None, reason)``.
    """
    text = response.rsplit(_THINK_END, 1)[-1]
    labels = LANGUAGE_LABELS[language]
    labelled: str | None = None
    unlabelled: str | None = None
    others: set[str] = set()
    for match in _FENCE.finditer(text):
        label = match["label"].lower()
        if label in labels:
            labelled = match["body"]
        elif not label:
            unlabelled = match["body"]
        else:
            others.add(label)
    code = labelled if labelled is not None else unlabelled
    if code is not None:
        return Extraction(code=code)
    if others:
        found = ", ".join(sorted(others))
        return Extraction(None, f"no ```{language} block in response (found only: {found})")
    return Extraction(None, f"no fenced ```{language} block in response")
