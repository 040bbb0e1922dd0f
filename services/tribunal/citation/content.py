"""What a claim asserts, read without a model, and compared with one snippet.

The lexical mode's word overlap alone pays a claim whose words come from a snippet but whose
assertion does not: a changed number, a swapped name, an added "not", "raises" for
"lowers", or words of two snippets joined into a claim neither states. This module reads the
parts of a text that carry its assertion, so that they can be required to agree with **one**
cited snippet:

- **numbers** (:func:`numbers`): digits with thousands separators and decimals, number words
  turned into digits first (``text2num.alpha2digit``: "nine percent" is 9 %), "million" /
  "billion" scales, and a unit when one follows (``%``, ``percent`` and ``per cent`` are one
  unit). A claim's number agrees with a snippet's when the snippet's value, rounded to the
  claim's decimals, is the claim's (9.4 % may be written 9 %), and the units do not differ.
- **named entities** (:func:`entities`): words capitalised inside a sentence, all-caps words,
  and words mixing letters and digits (``PD-1``, ``COVID-19``); a sentence's first word is
  one only when the evidence writes it capitalised inside a sentence too. An entity agrees
  when the snippet has the word (case-insensitive; the parts of a hyphenated word count).
- **negation** (:data:`NEGATIONS`, English and a few words of French, German, Spanish,
  Portuguese, Italian and Dutch) and **direction** (:data:`DIRECTIONS`: increase / decrease,
  higher / lower, more / less, before / after, …): compared with the snippet *clause* whose
  words best cover the claim's clause, so that a "not" elsewhere in an abstract does not count.

Words are stemmed with the Snowball English stemmer (``snowballstemmer``): a well-kept
implementation of Porter's second stemmer, pure Python, where the previous suffix list missed
"occurrence" / "occurred". spaCy is not used: its small English model is not published on
PyPI by spaCy itself, and a parser and NER per sentence would cost more than these rules
while needing the same fallbacks (``docs/citation.md``).

A figure may be restated in another unit of the same quantity (:data:`CONVERSIONS`, exact
factors only), and a clause's hedge words (:data:`HEDGES`) are read, so that a claim cannot
state as certain what its snippet hedges.

Known limits (the judge mode is the recommendation for training): synonyms of opposite
direction that mean the same ("reduced mortality" / "improved survival") share no word and
are not seen as support; a chimera inside one snippet (the figure of one sentence given to
the subject of another) is not seen; quantifiers ("all", "some") are not compared.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import chain, filterfalse

import snowballstemmer
from text_to_num import alpha2digit

from tribunal.citation.gates import STOPWORDS

_STEMMER = snowballstemmer.stemmer("english")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that state no content of their own in a claim: reporting verbs and hedges a faithful
# paraphrase adds ("the study found that…", "about 9 %"). Left out of coverage only.
_FILLER = _wordset(
    """study studies trial trials found find finds report reported reports reporting show
    showed shown shows demonstrate demonstrated demonstrates observe observed note noted
    according approximately about around roughly nearly almost some among authors paper
    researchers investigators data result results evidence indicate indicated indicates
    suggest suggested suggests total overall respectively occur occurs occurred occurring
    seen"""
)

NEGATIONS = _wordset(
    """not no never none nobody nothing neither nor without cannot cant dont doesnt didnt isnt
    arent wasnt werent wont hasnt havent hadnt fail fails failed failing lack lacks lacked
    lacking absent absence unable
    pas jamais aucun aucune sans ni nicht kein keine keinen keinem keiner nie niemals ohne
    nunca ningún ninguna ninguno sin não nem nenhum nenhuma nessun nessuna mai senza niet geen
    nooit zonder"""
)
"""Words that negate a clause (``n't`` is read as a separate ``not``)."""

_UP = """increase increased increases increasing rise rises rose risen rising raise raised
    raises raising higher highest more most greater greatest larger largest bigger biggest
    grow grew grown grows growing gain gained gains improve improved improves improving
    improvement better best elevated elevate elevation boost boosted above exceed exceeded
    exceeds longer longest taller tallest heavier heaviest enhance enhanced enhances
    accelerate accelerated promote promoted promotes induce induced induces activate
    activated activates stimulate stimulated stimulates strengthen strengthened upregulated
    upregulate superior"""
_DOWN = """decrease decreased decreases decreasing fall falls fell fallen falling lower lowered
    lowers lowering lowest less least fewer fewest smaller smallest shrink shrank shrunk
    shrinks decline declined declines declining drop dropped drops dropping reduce reduced
    reduces reducing reduction loss lost worsen worsened worsens worse worst below
    shorter shortest lighter impair impaired impairs slow slowed slows weaken weakened
    inhibit inhibited inhibits suppress suppressed suppresses attenuate attenuated diminish
    diminished diminishes downregulated downregulate inferior halved"""
DIRECTIONS: dict[str, int] = {
    **{w: 1 for w in _UP.split()},
    **{w: -1 for w in _DOWN.split()},
}
"""Direction and comparison words: +1 (up, more, after) or -1 (down, less, before)."""
_DIRECTION_WORDS = frozenset(DIRECTIONS)

HEDGES = _wordset(
    """may might could possibly perhaps potentially probably presumably putative suggest
    suggests suggested suggesting hypothesise hypothesised hypothesize hypothesized"""
)
"""Words that make a clause tentative: a claim stating as certain what its snippet only
hedges ("X may reduce Y" cited for "X reduces Y") is never fully supported."""

_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_CLAUSE_SPLIT = re.compile(
    r"[.!?;]\s+|\n+|,\s*(?:and|but|while|whereas|although|though|which|yet)\s+"
    r"|\s+(?:and|but|whereas|while|although)\s+",
    re.IGNORECASE,
)
# A number: not part of a word ("PD-1", "COVID-19", "H2O"), with thousands separators and
# decimals; a unit word or sign may follow. Written fixed-width for ``re``'s lookbehind.
_NUMBER = re.compile(
    r"(?<![^\W\d_]-)(?<![\w.,])(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:[.,](?P<dec>\d+))?"
    r"(?![\w-]*[^\W\d_])"
    r"(?:\s*(?P<unit>%|percent\b|per\s+cent\b|[^\W\d_]{1,12}))?",
    re.IGNORECASE,
)
_SCALES = {"thousand": 1e3, "million": 1e6, "millions": 1e6, "billion": 1e9, "billions": 1e9}
_SCALED = re.compile(
    r"(?<![\d.,])(\d+(?:\.\d+)?)\s+(thousand|millions?|billions?)\b", re.IGNORECASE
)
_PERCENT = frozenset({"%", "percent", "per cent", "pct", "percentage"})


def _scale(quantity: str, factors: str) -> dict[str, tuple[str, float]]:
    return {
        unit: (quantity, float(factor))
        for unit, factor in (pair.split("=") for pair in factors.split())
    }


CONVERSIONS: dict[str, tuple[str, float]] = {
    **_scale("length", "m=1 km=1e3 cm=1e-2 mm=1e-3 µm=1e-6 um=1e-6 nm=1e-9 mi=1609.344 ft=0.3048"),
    **_scale("mass", "g=1 kg=1e3 mg=1e-3 µg=1e-6 ug=1e-6 mcg=1e-6 ng=1e-9 lb=453.59237"),
    **_scale(
        "time",
        "s=1 ms=1e-3 min=60 mins=60 h=3600 hr=3600 hrs=3600 hour=3600 hours=3600 "
        "day=86400 days=86400 week=604800 weeks=604800",
    ),
    **_scale("years", "year=1 years=1 yr=1 yrs=1 decade=10 decades=10 century=100 centuries=100"),
    **_scale("volume", "l=1 dl=1e-1 ml=1e-3 µl=1e-6 ul=1e-6"),
    **_scale("frequency", "hz=1 khz=1e3 mhz=1e6 ghz=1e9"),
    **_scale("power", "w=1 kw=1e3 gw=1e9"),
    **_scale("energy", "j=1 kj=1e3 kwh=3.6e6 kcal=4184"),
}
"""Units of one quantity a claim may restate a snippet's figure in: ``unit -> (quantity,
factor to the quantity's base unit)``. Only exact factors of unambiguous unit words:
months and years (calendar lengths), ``in`` (a word), ``t``, ``mw`` (milli or mega),
``cal`` (small or food calorie), data sizes (1000 or 1024) and temperatures (affine) are
left out, so they convert to nothing and differ."""
_UNITS = _wordset(
    """m km cm mm nm µm um mi ft in kg g mg µg ug mcg ng lb t l ml dl µl ul s ms h hr hrs
    min mins hour hours day days week weeks month months year years yr yrs decade decades
    century centuries c f k hz khz mhz ghz w kw mw gw kwh v mv a ma j kj cal kcal mmhg
    mmol mol bp kb mb gb tb"""
)

_UNIT_WORDS = {
    word: unit
    for unit, words in {
        "m": "metre metres meter meters mètre mètres",
        "km": "kilometre kilometres kilometer kilometers kilomètre kilomètres",
        "cm": "centimetre centimetres centimeter centimeters",
        "mm": "millimetre millimetres millimeter millimeters",
        "g": "gram grams gramme grammes",
        "kg": "kilogram kilograms kilo kilos kilogramme kilogrammes",
        "mg": "milligram milligrams",
        "µg": "microgram micrograms",
        "l": "litre litres liter liters",
        "ml": "millilitre millilitres milliliter milliliters",
        "s": "second seconds sec secs",
        "min": "minute minutes",
        "mi": "mile miles",
        "ft": "foot feet",
        "lb": "pound pounds lbs",
        "hz": "hertz",
        "w": "watt watts",
        "kw": "kilowatt kilowatts",
        "j": "joule joules",
    }.items()
    for word in words.split()
}
"""Units written as words, read as their symbols (so that "5 milligrams" is 5 mg)."""

# The first word of each sentence, as ``_WORD`` reads it: after the text's start, an end of
# sentence or a colon, or a new line (and a bullet).
_SENTENCE_FIRST = re.compile(r"(?:^|[.!?:;]\s+|\n\s*[-*•]?\s*)(" + _WORD.pattern + ")")
_PARTS = re.compile(r"['-]")
_ACRONYM = re.compile(r"\(([A-Z][A-Za-z0-9-]{1,9})\)")
_NOT_CONTENT = STOPWORDS | _FILLER | _UNITS | _PERCENT


@dataclass(frozen=True)
class Number:
    """A number of a text.

    Attributes:
        value: Its value, scales applied (1.2 million is 1 200 000).
        decimals: Decimals written (rounding tolerance when it is a claim's).
        unit: ``%`` for percentages, a lower-cased unit word from a fixed list, or ''.
    """

    value: float
    decimals: int
    unit: str


@dataclass(frozen=True)
class Clause:
    """One clause.

    Attributes:
        stems: Its content stems.
        negated: It holds a negation word.
        directions: The signs of its direction words (+1, -1).
        direction_words: Those words.
        numbers: Its numbers (claims only; () for a snippet's clauses).
        entities: Its entity words (claims only).
        hedged: It holds a hedge word (:data:`HEDGES`).
        tokens: Its lower-cased words (``n't`` read as ``not``).
    """

    stems: frozenset[str]
    negated: bool
    directions: frozenset[int]
    direction_words: frozenset[str]
    numbers: tuple[Number, ...] = ()
    entities: frozenset[str] = frozenset()
    hedged: bool = False
    tokens: frozenset[str] = frozenset()


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """Snowball English stem of a lower-cased word (cached: vocabularies repeat).

    Examples:
        >>> [stem(w) for w in ("patients", "occurred", "occurrence", "increasing")]
        ['patient', 'occur', 'occurr', 'increas']
    """
    return str(_STEMMER.stemWord(word))


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("’", "'"))


def content_stems(text: str) -> frozenset[str]:
    """Stems of the words of ``text`` that carry content (no stopword, filler or number)."""
    return _stems_of(_tokens(text))


_TOKEN_STEMS: dict[str, tuple[str, ...]] = {}
_TOKEN_STEMS_MAX = 1 << 18


def _stems_of(tokens: list[str]) -> frozenset[str]:
    # Each distinct token once, and the look-ups in C (set difference, map, chain): a 2 kB
    # snippet repeats most of its words, and a Python loop per token was most of its cost.
    unique = set(tokens)
    missing = unique.difference(_TOKEN_STEMS)
    if missing:
        if len(_TOKEN_STEMS) + len(missing) > _TOKEN_STEMS_MAX:  # bounds a worker's memory
            _TOKEN_STEMS.clear()
            missing = unique
        for token in missing:
            _TOKEN_STEMS[token] = _token_stems(token)
    return frozenset(chain.from_iterable(map(_TOKEN_STEMS.__getitem__, unique)))


def _token_stems(token: str) -> tuple[str, ...]:
    """The content stems of one lower-cased token (its hyphen and apostrophe parts)."""
    parts = _PARTS.split(token) if "-" in token or "'" in token else (token,)
    return tuple(
        stem(part)
        for part in parts
        if len(part) > 1 and not part.isdigit() and part not in _NOT_CONTENT
    )


def negated(text: str) -> bool:
    """Whether ``text`` holds a negation word (``n't`` included)."""
    return any(t in NEGATIONS for t in _tokens(text.replace("n't", " not").replace("n’t", " not")))


def numbers(text: str) -> tuple[Number, ...]:
    """The numbers of ``text`` (number words first turned into digits).

    Examples:
        >>> [(n.value, n.unit) for n in numbers("Nine percent of 1,280 m; 1.2 million people")]
        [(9.0, '%'), (1280.0, 'm'), (1200000.0, '')]
    """
    out = []
    for whole, dec, unit in _NUMBER.findall(_digits(text)):
        value = float(whole.replace(",", "") + ("." + dec if dec else ""))
        unit = " ".join(unit.lower().split())  # "per  cent" is "per cent"
        unit = _UNIT_WORDS.get(unit, unit)
        unit = "%" if unit in _PERCENT else unit if unit in _UNITS else ""
        out.append(Number(value, len(dec), unit))
    return tuple(out)


_NUMBER_WORD = re.compile(
    r"(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fifteen"
    r"|twenty|thirty|forty|fifty|eighty|hundred|thousand|million|billion)",
    re.IGNORECASE,
)
"""Stems of every English cardinal word ``text2num`` reads (fourteen, sixty, … contain one
of them); a text without any is left as it is."""


def _digits(text: str) -> str:
    """``text`` with English number words as digits ("twelve" → 12; "one" left alone) and
    scaled figures multiplied out ("1.2 million" → 1200000)."""
    text = _SCALED.sub(lambda m: f"{float(m.group(1)) * _SCALES[m.group(2).lower()]:.0f}", text)
    if _NUMBER_WORD.search(text) is None:  # most texts: alpha2digit would change nothing
        return text
    try:
        return str(alpha2digit(text, "en"))
    except (ValueError, OverflowError):  # a number word sequence it cannot read: keep words
        return text


def entities(
    text: str,
    proper: frozenset[str] = frozenset(),
    names: list[tuple[str, bool]] | None = None,
) -> frozenset[str]:
    """Lower-cased named-entity words of ``text``.

    Args:
        text: A claim or snippet.
        proper: Lower-cased words written capitalised inside a sentence somewhere in the
            evidence: a sentence's first word is an entity only when it is one of them (or
            all-caps, or mixes letters and digits).
        names: ``_not_lower(text)`` when the caller has it already.

    Examples:
        >>> sorted(entities("Roughly 9% of patients on anti-PD-1 in France had HPD."))
        ['anti-pd-1', 'france', 'hpd']
    """
    defined = _defined_acronyms(text)
    out = set()
    for token, inside in _not_lower(text) if names is None else names:
        if token.isdigit():  # a plain number
            continue
        lower = token.lower().replace("’", "'").removesuffix("'s")
        if lower in defined:
            continue
        strong = any(c.isdigit() for c in token) and any(c.isalpha() for c in token)
        strong = strong or (sum(c.isupper() for c in token) >= 2)
        if not strong and not token[0].isupper():
            continue
        if lower in STOPWORDS or lower in _FILLER or lower in NEGATIONS:
            continue
        if strong or inside or lower in proper:
            out.add(lower)
    return frozenset(out)


def _not_lower(text: str) -> list[tuple[str, bool]]:
    """The distinct words of ``text`` that are not all lower case (most words are: they are
    filtered in C, not looped over), each with whether it occurs somewhere other than as a
    sentence's first word."""
    counts = Counter(_WORD.findall(text))
    first = Counter(_SENTENCE_FIRST.findall(text))
    return [(token, counts[token] > first[token]) for token in filterfalse(str.islower, counts)]


def _defined_acronyms(text: str) -> set[str]:
    """Lower-cased acronyms ``text`` defines in place: "hyperprogressive disease (HPD)" names
    nothing the words before it did not (its letters, in order, start a word there and run
    through those words), so a claim adding it asserts no new entity."""
    out = set()
    for match in _ACRONYM.finditer(text):
        acronym = match.group(1).lower()
        letters = [c for c in acronym if c.isalpha()]
        before = _WORD.findall(text[max(0, match.start() - 80) : match.start()].lower())
        words = before[-2 * len(letters) :]
        for first in range(len(words)):
            if words[first][0] == letters[0] and _subsequence(letters, " ".join(words[first:])):
                out.add(acronym)
                break
    return out


def _subsequence(letters: list[str], text: str) -> bool:
    found = iter(text)
    return all(letter in found for letter in letters)


def proper_words(text: str, names: list[tuple[str, bool]] | None = None) -> frozenset[str]:
    """Lower-cased words written capitalised inside a sentence of ``text`` (see
    :func:`entities`; ``names``: ``_not_lower(text)`` when the caller has it already)."""
    return frozenset(
        token.lower().removesuffix("'s")
        for token, inside in (_not_lower(text) if names is None else names)
        if inside and token[0].isupper()
    )


def clauses(
    text: str, proper: frozenset[str] = frozenset(), *, anchors: bool = False
) -> tuple[Clause, ...]:
    """Split ``text`` into clauses (sentences, ``;``, and clauses joined by "and", "but",
    "while", …), each with its stems, negation and direction words, and with ``anchors``
    its numbers and entities; clauses with neither a content word nor a number are dropped.
    """
    out = []
    # An acronym defined in place repeats the words before it: not content of its own.
    defined = {stem(a) for a in _defined_acronyms(text)}
    for part in _CLAUSE_SPLIT.split(text):
        tokens = _tokens(part.replace("n't", " not").replace("n’t", " not"))
        stems = _stems_of(tokens) - defined
        found = numbers(part) if anchors else ()
        if not stems and not found:
            continue
        moves = _DIRECTION_WORDS.intersection(tokens)
        out.append(
            Clause(
                stems,
                not NEGATIONS.isdisjoint(tokens),
                frozenset(DIRECTIONS[t] for t in moves),
                moves,
                found,
                entities(part, proper) if anchors else frozenset(),
                not HEDGES.isdisjoint(tokens),
                frozenset(tokens),
            )
        )
    return tuple(out)


def union_stems(parts: tuple[Clause, ...]) -> frozenset[str]:
    """The stems of a text from its clauses': they cover the text but for the words it is
    split on (stopwords), so the text is not read twice."""
    return frozenset().union(*(c.stems for c in parts))


def _words(text: str) -> frozenset[str]:
    """Lower-cased words of ``text``, with every part of a hyphenated word (entity look-up)."""
    words = set(_tokens(text))
    for token in [t for t in words if "-" in t or "'" in t]:
        token = token.removesuffix("'s")
        words.add(token)
        pieces = token.split("-")
        for i in range(1, len(pieces)):  # "anti-pd-1" also holds "pd-1", "anti-pd", "1"
            words.add("-".join(pieces[i:]))
            words.add("-".join(pieces[:i]))
    return frozenset(words)


class Snippet:
    """What one snippet states, read with its own proper words (a claim is read with those of
    its cited snippets); its numbers and entities are read on first use (a claim without a
    number does not need the snippet's).

    Attributes:
        text: The snippet.
        proper: Words it writes capitalised inside a sentence.
        stems: Content stems.
        words: Lower-cased words, with every part of a hyphenated word.
        clauses: Its clauses (without numbers or entities).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._names = _not_lower(text)
        self.proper = proper_words(text, self._names)
        self.clauses = clauses(text, self.proper)
        self.stems = union_stems(self.clauses)
        self.words = _words(text)

    @cached_property
    def numbers(self) -> tuple[Number, ...]:
        """Its numbers."""
        return numbers(self.text)

    @cached_property
    def entities(self) -> frozenset[str]:
        """Its named-entity words."""
        return entities(self.text, self.proper, self._names)


@lru_cache(maxsize=2048)
def read_snippet(text: str) -> Snippet:
    """The :class:`Snippet` of ``text``, cached by its text: the completions of a GRPO group,
    scored one after the other, cite the same snippets."""
    return Snippet(text)


def number_agrees(claim: Number, snippet: tuple[Number, ...]) -> bool:
    """Whether the snippet states the claim's number: the same value once rounded to the
    claim's decimals (a relative 1e-9 for float noise), in the same unit or one of
    :data:`CONVERSIONS` of the same quantity ("1.28 km" states "1,280 m"; "1.5 km" does
    not), and no other unit."""
    for other in snippet:
        value = other.value
        if claim.unit and other.unit and claim.unit != other.unit:
            mine, theirs = CONVERSIONS.get(claim.unit), CONVERSIONS.get(other.unit)
            if mine is None or theirs is None or mine[0] != theirs[0]:
                continue
            value = other.value * theirs[1] / mine[1]
        rounded = round(value, claim.decimals)
        if abs(rounded - claim.value) <= 1e-9 * max(1.0, abs(claim.value)):
            return True
    return False


def coverage(claim: frozenset[str], text: frozenset[str]) -> float:
    """Share of the claim's stems found in ``text``'s (0 for a claim without any)."""
    return len(claim & text) / len(claim) if claim else 0.0


def best_clause(claim: Clause, snippet: Snippet) -> tuple[Clause | None, float]:
    """The snippet clause whose stems best cover ``claim``'s, and that coverage (first of
    equals)."""
    best: Clause | None = None
    best_cover = 0.0
    for clause in snippet.clauses:
        cover = coverage(claim.stems, clause.stems)
        if cover > best_cover:
            best, best_cover = clause, cover
    return best, best_cover
