"""Normalise a completion's text once, before any extraction or word rule reads it.

A rule that reads words ("not", "maybe") or markers (``\\boxed``, ``####``, ``Answer:``) is
searched around by spelling them so that they look the same but compare differently:
full-width letters (``ｎｏｔ``), a zero-width space inside a word (``n\\u200bot``), a
Cyrillic ``о`` for the Latin ``o``, a right single quotation mark in ``isn’t``.
:func:`normalize_text` closes those spellings in one pass:

1. Unicode NFKC (full-width and compatibility forms become their plain letters and digits:
   ``ｎｏｔ`` → ``not``, ``５`` → ``5``);
2. format characters (category ``Cf``: zero-width spaces and joiners, bidi controls, the
   soft hyphen, the BOM) removed;
3. letters confusable with a Latin letter folded to it, with the Unicode confusables table
   (UTS #39 ``confusables.txt``) as shipped by the ``confusable-homoglyphs`` package:
   Cyrillic ``о``, ``е``, ``а``, ``і`` … become ``o``, ``e``, ``a``, ``i``. Lowercase Greek
   letters other than omicron are kept: ``α``, ``ν``, ``ρ`` are variables in mathematics
   (the table would fold them to ``a``, ``v``, ``p``);
4. apostrophes unified (``’``, ``ʼ``, ``‘``, ``´``, ``′`` in a word → ``'``).

Digits, operators and LaTeX are unchanged (NFKC leaves ASCII alone), so the comparison sees
the same answer as before; the minus sign ``−`` stays ``−`` (Math-Verify reads it).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from confusable_homoglyphs.confusables import confusables_data

_APOSTROPHES = {"\u2019", "\u02bc", "\u2018", "\u00b4", "\u2032", "\u02b9", "\uff07"}
_GREEK_SMALL = range(0x3B1, 0x3CA)
_OMICRON = "\u03bf"


@lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    """The Latin letter ``char`` is confusable with, or ``char`` itself."""
    if char in _APOSTROPHES:
        return "'"
    if not unicodedata.category(char).startswith("L"):
        return char
    if ord(char) in _GREEK_SMALL and char != _OMICRON:
        return char
    for entry in confusables_data.get(char, ()):
        target = entry["c"]
        if len(target) == 1 and target.isascii() and target.isalpha():
            return str(target)
    return char


def normalize_text(text: str) -> str:
    """Return ``text`` in NFKC, without format characters, confusables folded to Latin.

    Linear in ``len(text)``; an ASCII text is returned as it is after one ``isascii`` check.

    Args:
        text: A completion (any length).

    Returns:
        The normalised text (see the module docstring). The ASCII backquote is not an
        apostrophe here: it delimits Markdown code.

    Examples:
        >>> normalize_text("the answer is n\\u200bоt ５")
        'the answer is not 5'
        >>> normalize_text("isn’t")
        "isn't"
    """
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKC", text)
    out = []
    for char in text:
        if char.isascii():
            out.append(char)
        elif unicodedata.category(char) == "Cf":
            continue
        else:
            out.append(_fold(char))
    return "".join(out)
