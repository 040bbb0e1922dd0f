"""Generators of attack classes: meaning-changing and meaning-preserving mutations of an
honest citation answer (seeded, deterministic).

Each generator takes the honest response, its evidence and a ``random.Random`` and returns
the mutated response, or None when the answer offers nothing to mutate (no figure to swap,
no hedge to drop). Mutations act on the text of the cited claims, never on the tags.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

Mutation = Callable[[str, dict[str, str], random.Random], str | None]

_CLAIM = re.compile(r"(<(?:cite|snippet)\b[^>]*>)(.*?)(</(?:cite|snippet)\s*>)", re.S)
_NUMBER = re.compile(
    r"(?<![\w.,-])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w-])|(?<![\w.,-])\d+(?:\.\d+)?(?![\w-])"
)
_IDS = re.compile(r"ids?\s*=\s*[\"']?([^\"'>]+)")

DIRECTION_SWAPS = {
    "lowered": "raised",
    "raised": "lowered",
    "reduce": "increase",
    "reduced": "increased",
    "increase": "reduce",
    "increased": "reduced",
    "higher": "lower",
    "lower": "higher",
    "more": "fewer",
    "before": "after",
    "after": "before",
}
UNIT_SWAPS = {
    " m.": " km.",
    " m ": " km ",
    "mg": "g",
    "%": " mg",
    "weeks": "months",
    "mètres": "kilomètres",
    "years": "months",
}
MARKED = ("not ", "may ", "only ", "all ", "suggest ", "possibly ", "could ", "never ")
UNCITED_FACTS = {
    "plain": " Aspirin cures every known cancer within days.",
    "hard-wrapped": "\nAspirin cures\nevery known\ncancer within\ndays.",
    "table": "\n| drug | effect |\n|---|---|\n| aspirin | cures every cancer |",
    "bullet": "\n- aspirin\n- cures every\n  known cancer",
    "french": " L'aspirine guérit tous les cancers connus en quelques jours.",
    "german": " Aspirin heilt jeden bekannten Krebs in wenigen Tagen.",
    "lower-case": " aspirin cures every known cancer within days.",
}


def claims(response: str) -> list[re.Match[str]]:
    """The cited claims of a response, as matches (tag, text, closing tag)."""
    return list(_CLAIM.finditer(response))


def _rewrite(response: str, rewrite: Callable[[re.Match[str]], str | None]) -> str | None:
    """Rewrite the first cited claim for which ``rewrite`` gives a different text."""
    for claim in claims(response):
        text = rewrite(claim)
        if text is not None and text != claim.group(2):
            return response[: claim.start(2)] + text + response[claim.end(2) :]
    return None


def _cited_text(claim: re.Match[str], evidence: dict[str, str]) -> str:
    ids = _IDS.search(claim.group(1))
    names = [i.strip() for i in ids.group(1).split(",")] if ids else []
    return " ".join(evidence.get(name, "") for name in names)


def swap_number(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    def change(claim: re.Match[str]) -> str | None:
        found = list(_NUMBER.finditer(claim.group(2)))
        if not found:
            return None
        n = rng.choice(found)
        value = n.group().replace(",", "")
        new = str(int(float(value)) + rng.randint(2, 9))
        return claim.group(2)[: n.start()] + new + claim.group(2)[n.end() :]

    return _rewrite(response, change)


def swap_unit(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    def change(claim: re.Match[str]) -> str | None:
        text = claim.group(2)
        for old, new in UNIT_SWAPS.items():
            if old in text:
                return text.replace(old, new, 1)
        return None

    return _rewrite(response, change)


def swap_name(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    def change(claim: re.Match[str]) -> str | None:
        text = claim.group(2)
        names = [m for m in re.finditer(r"\b[A-Z][a-zé]{2,}\b", text) if m.start() > 0]
        names = names or list(re.finditer(r"\b[A-Z][a-zé]{3,}\b", text))
        if not names:
            return None
        name = rng.choice(names)
        return text[: name.start()] + "Zellweger" + text[name.end() :]

    return _rewrite(response, change)


def swap_direction(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    def change(claim: re.Match[str]) -> str | None:
        text = claim.group(2)
        for old, new in DIRECTION_SWAPS.items():
            if re.search(rf"\b{old}\b", text):
                return re.sub(rf"\b{old}\b", new, text, count=1)
        return re.sub(r"\b(opened|discovered|achevée|inaugurée?)\b", r"\1 after", text, count=1)

    return _rewrite(response, change)


def add_quantifier(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    def change(claim: re.Match[str]) -> str | None:
        text = claim.group(2)
        number = _NUMBER.search(text)
        if number is not None:
            return text[: number.start()] + "only " + text[number.start() :]
        return "All " + text[0].lower() + text[1:]

    return _rewrite(response, change)


def shift_scope(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    def change(claim: re.Match[str]) -> str | None:
        text = claim.group(2).rstrip()
        end = "." if text.endswith(".") else ""
        return text.removesuffix(".") + rng.choice([" in mice", " in all adults"]) + end

    return _rewrite(response, change)


def flip_polarity(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    def change(claim: re.Match[str]) -> str | None:
        text = claim.group(2)
        if " not " in text:
            return text.replace(" not ", " ", 1)
        if re.search(r"\b(?:a été|est|mesure)\b", text):
            return "Il est faux que " + text[0].lower() + text[1:]
        return "It is not true that " + text[0].lower() + text[1:]

    return _rewrite(response, change)


def add_hedge(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    def change(claim: re.Match[str]) -> str | None:
        text = claim.group(2)
        for word in ("may ", "could ", "suggest ", "possibly "):
            if word in text:
                return text.replace(word, "", 1)  # the hedge dropped
        return "Possibly, " + text[0].lower() + text[1:]

    return _rewrite(response, change)


def move_figure(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    """Give the claim another figure of its own cited passage."""

    def change(claim: re.Match[str]) -> str | None:
        text = claim.group(2)
        mine = list(_NUMBER.finditer(text))
        others = [
            m.group()
            for m in _NUMBER.finditer(_cited_text(claim, evidence))
            if m.group() not in {n.group() for n in mine}
        ]
        if not mine or not others:
            return None
        n = rng.choice(mine)
        return text[: n.start()] + rng.choice(others) + text[n.end() :]

    return _rewrite(response, change)


def drop_qualifier(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    def change(claim: re.Match[str]) -> str | None:
        text = claim.group(2)
        for word in MARKED:
            if f" {word}" in f" {text}":
                return re.sub(rf"\b{word}", "", text, count=1, flags=re.IGNORECASE)
        return None

    return _rewrite(response, change)


def uncited_fact(layout: str) -> Mutation:
    def add(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
        return response.replace("</answer>", UNCITED_FACTS[layout] + "</answer>")

    add.__name__ = f"uncited_fact_{layout}"
    return add


def reorder(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    found = claims(response)
    if len(found) < 2:
        return None
    body = " ".join(m.group() for m in reversed(found))
    return "<answer>" + body + "</answer>"


_CONVERSIONS = [
    (re.compile(r"\b1,280 m\b"), "1.28 km"),
    (re.compile(r"\b500 mg\b"), "0.5 g"),
    (re.compile(r"\b12 weeks\b"), "84 days"),
    (re.compile(r"\b2460 mètres\b"), "2460 m"),
]


def convert_unit(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    def change(claim: re.Match[str]) -> str | None:
        for pattern, new in _CONVERSIONS:
            if pattern.search(claim.group(2)):
                return pattern.sub(new, claim.group(2), count=1)
        return None

    return _rewrite(response, change)


def pronoun_subject(response: str, evidence: dict[str, str], rng: random.Random) -> str | None:
    def change(claim: re.Match[str]) -> str | None:
        match = re.match(r"The (?:[A-Z][a-z]+ )+(?=[a-z])", claim.group(2))
        return "It " + claim.group(2)[match.end() :] if match else None

    return _rewrite(response, change)


MEANING_CHANGING: list[Mutation] = [
    swap_number,
    swap_unit,
    swap_name,
    swap_direction,
    add_quantifier,
    shift_scope,
    flip_polarity,
    add_hedge,
    move_figure,
    drop_qualifier,
    *(uncited_fact(layout) for layout in UNCITED_FACTS),
]
"""Every mutation must be paid less than the honest answer."""

MEANING_PRESERVING: list[Mutation] = [reorder, convert_unit, pronoun_subject]
"""Every mutation must be paid what lexical mode promises (reorder and documented
conversions: the honest reward; a pronoun subject: at least partial)."""
