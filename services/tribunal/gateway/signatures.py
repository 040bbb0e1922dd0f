"""Hack signatures: what a policy that games its reward tends to change, counted per spec.

Per spec item, from the rollout and the spec's result (never from reading the prose for
refusal words: each signature is a measurement, and none moves a reward):

- ``length``: the response's length in characters (its drift: a policy padding or
  truncating);
- ``repetition``: the share of the response's word 4-grams that repeat an earlier one
  (1 - distinct / total; 0 below five words): degenerate loops;
- ``duplicate``: 1 when the response is identical to an earlier completion of its GRPO group
  in the same batch: collapsed groups, which leave GRPO no advantage;
- ``uncommitted``: 1 when a math component found no committed answer (``details.uncommitted``:
  several candidates, hedged, negated ... from the answer grammar of ``tribunal.math``);
- ``no_region``: 1 when a math component found no final answer region (``details.region`` is
  null: a ``<think>`` never closed);
- ``format_share`` (only for a spec with a component declared ``format_only``): the share of
  the item's positive pay that its format-only components give, ``sum over format-only
  components of max(0, w·r) / sum over all its summed components of max(0, w·r)`` (0 when
  nothing is paid): near 1 when the item is paid for its form alone;
- ``unused_tools``: the share of the response's tool outputs (``<tool_response>`` blocks)
  that the policy's later text never uses (:func:`unused_tool_outputs`): calls made for the
  pay a spec gives per call, not for their answers;
- ``claim_duplicate`` and ``claim_uncited`` (only for a spec with a citation component): the
  share of the citation scorer's claims (its ``details.claims``, from ``tribunal.citation``)
  that it set aside as duplicates of an earlier claim, and that carry no citation.

Beside them, not a signature but counted the same way: ``cost``, what the item's components
spent on model calls (:func:`item_cost_usd`: the sum of each component's
``details.usage.cost_usd``, the judge's tokens at ``TRIBUNAL_JUDGE_PRICE``), in nano-dollars
(``cost|<spec>|usd`` for /metrics, ``cost`` in a window), and ``unpriced``, the items whose
components made model calls that no price made a cost (``cost_usd`` null).

:func:`batch_signatures` tallies them twice: as counters (``sig|<spec>|<signature>`` sums, in
millionths except ``length`` in characters, and ``sig|<spec>|items``), which the gateway adds
to its cluster-wide stats: ``tribunal_spec_signature_total`` and
``tribunal_spec_signature_items_total`` in /metrics, whose ratio over a range is the mean, and
the shipped rule ``TribunalSignatureDrift`` compares it with a longer baseline (windows of
time); and per spec and **window** (the trainer's step window of the item, or a time window
without a step: ``tribunal.gateway.audit.window_of``), the same sums, which the audit store
keeps for ``GET /v1/signatures``. The work grows with the responses' size, so the gateway
runs it in a thread after the answer (``tribunal.gateway.audit.Auditor``).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tribunal.core.metrics import MICRO, NANO, SEP

SIGNATURES = (
    "length",
    "repetition",
    "duplicate",
    "uncommitted",
    "no_region",
    "format_share",
    "unused_tools",
    "claim_duplicate",
    "claim_uncited",
)
"""The signatures counted, in the order of the docs (``format_share`` only for a spec with a
format-only component, the ``claim_*`` ones only for a spec with a citation component)."""

CLAIM_SIGNATURES = ("claim_duplicate", "claim_uncited")
"""The signatures read from a citation component's claims."""

NGRAM = 4
"""Words per n-gram of ``repetition``."""

_SUMS = ("items", *SIGNATURES, "cost", "unpriced")
"""A window's sums, in :func:`batch_signatures`' order."""

_COUNTER = {"cost": "cost{sep}{spec}{sep}usd", "unpriced": "cost{sep}{spec}{sep}unpriced"}
"""The counters (for /metrics) of the sums that are not signatures."""


def repetition(text: str) -> float:
    """The share of word ``NGRAM``-grams of ``text`` that repeat an earlier one, in [0, 1].

    >>> repetition("a b c d a b c d a b c d")
    0.5555555555555556
    >>> repetition("the answer is 7")
    0.0
    """
    words = text.split()
    total = len(words) - NGRAM + 1
    if total < 2:
        return 0.0
    distinct = len({tuple(words[i : i + NGRAM]) for i in range(total)})
    return 1.0 - distinct / total


# A tool output's block, and the words it could be used by: numbers, and words of three
# characters or more (shorter ones, "a", "is", are in any text).
_TOOL_BLOCK = re.compile(r"<tool_response>|</tool_response>")
_WORD = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]{3,}")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def unused_tool_outputs(text: str) -> tuple[int, int]:
    """How many of ``text``'s tool outputs its later text uses: ``(unused, outputs)``.

    A tool output is a ``<tool_response>`` block (to its ``</tool_response>``, or the next
    block, or the end). It is **used** when a word it brought into the conversation (a
    number, or a word of three letters or more, that no earlier part of ``text`` holds: the
    call's own arguments are not the tool's answer) appears in the policy's text after it
    (outside tool outputs). An output that brought no new word is not counted either way.
    One linear pass over ``text`` (first and last places of each word).

    >>> unused_tool_outputs("<tool_call>2*3</tool_call><tool_response>6</tool_response> It is 6.")
    (0, 1)
    >>> unused_tool_outputs("<tool_call>2*3</tool_call><tool_response>6</tool_response> It is 5.")
    (1, 1)
    """
    if "<tool_response>" not in text:  # most responses: no word is read
        return 0, 0
    segments: list[tuple[bool, str]] = []  # (is a tool output, its text), in order
    at, inside = 0, False
    for token in _TOOL_BLOCK.finditer(text):
        segments.append((inside, text[at : token.start()]))
        inside, at = token.group() == "<tool_response>", token.end()
    segments.append((inside, text[at:]))
    first: dict[str, int] = {}
    last_policy: dict[str, int] = {}
    outputs: list[tuple[int, set[str]]] = []
    for index, (is_output, part) in enumerate(segments):
        words = _words(part)
        for word in words:
            first.setdefault(word, index)
            if not is_output:
                last_policy[word] = index
        if is_output:
            outputs.append((index, words))
    unused = counted = 0
    for index, words in outputs:
        new = [w for w in words if first[w] == index]
        if not new:
            continue
        counted += 1
        unused += all(last_policy.get(w, -1) < index for w in new)
    return unused, counted


def claim_shares(details: Mapping[str, Any]) -> tuple[float, float]:
    """The shares of a spec item's citation claims set aside as duplicates, and uncited.

    Args:
        details: The spec result's details (``sub_rewards``: a citation component's
            ``details.claims``, each with ``cited`` and ``gate``).

    Returns:
        ``(duplicate, uncited)`` over every claim of the item's citation components, each in
        [0, 1]; ``(0, 0)`` without claims.

    >>> claims = [{"cited": True}, {"cited": True, "gate": "duplicate"}, {"cited": False}]
    >>> sub = {"source": "citation", "details": {"claims": claims}}
    >>> claim_shares({"sub_rewards": {"cite": sub}})
    (0.3333333333333333, 0.3333333333333333)
    """
    subs = details.get("sub_rewards")
    if not isinstance(subs, dict):
        return 0.0, 0.0
    total = duplicates = uncited = 0
    for sub in subs.values():
        if not isinstance(sub, dict) or sub.get("source") != "citation":
            continue
        inner = sub.get("details")
        claims = inner.get("claims") if isinstance(inner, dict) else None
        if not isinstance(claims, list):
            continue
        for claim in claims:
            if not isinstance(claim, dict):
                continue
            total += 1
            duplicates += claim.get("gate") == "duplicate"
            uncited += claim.get("cited") is False
    return (duplicates / total, uncited / total) if total else (0.0, 0.0)


def _math_flags(details: Mapping[str, Any]) -> tuple[int, int]:
    """(uncommitted, no_region) over a spec result's math components (any of them)."""
    uncommitted = no_region = 0
    subs = details.get("sub_rewards")
    if not isinstance(subs, dict):
        return 0, 0
    for sub in subs.values():
        if not isinstance(sub, dict) or sub.get("source") != "math":
            continue
        inner = sub.get("details")
        if not isinstance(inner, dict):
            continue
        uncommitted |= inner.get("uncommitted") is not None
        no_region |= "region" in inner and inner["region"] is None
    return uncommitted, no_region


def item_cost_usd(details: Mapping[str, Any]) -> tuple[float, bool]:
    """What a spec item's components spent on model calls, and whether any call was unpriced.

    Args:
        details: The spec result's details (``sub_rewards``: per component its verifier's
            ``details``, whose ``usage`` a judge fills: ``calls`` and ``cost_usd``).

    Returns:
        ``(USD, unpriced)``: the sum of the components' finite ``usage.cost_usd`` >= 0, and
        True when a component made model calls (``usage.calls`` > 0) with no ``cost_usd``
        (its model has no price): that item's cost is then a lower bound.

    >>> usage = {"calls": 2, "cost_usd": 0.0003}
    >>> item_cost_usd({"sub_rewards": {"judge": {"details": {"usage": usage}}}})
    (0.0003, False)
    """
    subs = details.get("sub_rewards")
    if not isinstance(subs, dict):
        return 0.0, False
    cost, unpriced = 0.0, False
    for sub in subs.values():
        inner = sub.get("details") if isinstance(sub, dict) else None
        usage = inner.get("usage") if isinstance(inner, dict) else None
        if not isinstance(usage, dict):
            continue
        spent = usage.get("cost_usd")
        if isinstance(spent, (int, float)) and math.isfinite(spent) and spent >= 0:
            cost += spent
        elif isinstance(usage.get("calls"), int) and usage["calls"] > 0:
            unpriced = True
    return cost, unpriced


def format_share(details: Mapping[str, Any], terms: Mapping[str, bool]) -> float:
    """The share of an item's positive pay that its format-only components give, in [0, 1].

    Args:
        details: The spec result's details (``sub_rewards``: per component its ``reward``
            and ``weight``).
        terms: The spec's summed components (gates excluded: a gate pays nothing itself),
            each with whether it is format-only.

    Each component pays ``max(0, weight · reward)`` (a component without a reward pays 0);
    the share is the format-only components' pay over all of it, 0 when nothing is paid.

    >>> subs = {"fmt": {"reward": 1.0, "weight": 0.5}, "math": {"reward": 0.0, "weight": 1.0}}
    >>> format_share({"sub_rewards": subs}, {"fmt": True, "math": False})
    1.0
    """
    subs = details.get("sub_rewards")
    if not isinstance(subs, dict):
        return 0.0
    paid = formatted = 0.0
    for name, is_format in terms.items():
        sub = subs.get(name)
        if not isinstance(sub, dict):
            continue
        reward, weight = sub.get("reward"), sub.get("weight")
        if not isinstance(reward, (int, float)) or not isinstance(weight, (int, float)):
            continue
        pay = weight * reward
        if not math.isfinite(pay) or pay <= 0:
            continue
        paid += pay
        if is_format:
            formatted += pay
    return formatted / paid if paid > 0 else 0.0


@dataclass
class SignatureTally:
    """What :func:`batch_signatures` counted of a batch.

    Attributes:
        counters: ``{"sig|<spec>|<signature>": sum, "sig|<spec>|items": n}`` for /metrics:
            sums in millionths, but ``length`` in characters; ``"cost|<spec>|usd"``
            (nano-dollars) and ``"cost|<spec>|unpriced"`` (items).
        windows: Per ``(spec, window)``: the window's order (its first step, or its start
            time) and the same sums without the prefix (``{"items": n, "length": ...}``).
    """

    counters: dict[str, int] = field(default_factory=dict)
    windows: dict[tuple[str, str], tuple[float, dict[str, int]]] = field(default_factory=dict)


def batch_signatures(
    rows: Iterable[tuple[str, str, Any, Mapping[str, Any], str, float]],
    format_terms: Mapping[str, Mapping[str, bool]] | None = None,
    citing: Collection[str] = (),
) -> SignatureTally:
    """The signatures of a batch's spec items, per spec and per window.

    Args:
        rows: ``(spec, group, response, result details, window, window order)`` per scored
            spec item (``response`` as the rollout gave it: a non-string counts as length 0).
        format_terms: Per spec with a format-only component, its summed components and
            whether each is format-only (:func:`format_share`); other specs count no
            ``format_share``.
        citing: The specs with a citation component: only they count the ``claim_*``
            signatures.

    Returns:
        The counters for /metrics and the sums per window (:class:`SignatureTally`).
    """
    shares = format_terms or {}
    seen: set[tuple[str, str, bytes]] = set()
    # Per (spec, window): [order, then the sums in _SUMS' order], as plain numbers (cost in
    # dollars until the end, rounded once per window): named sums are built once per window,
    # not per item.
    sums: dict[tuple[str, str], list[Any]] = {}
    for spec, group, response, details, window, order in rows:
        text = response if isinstance(response, str) else ""
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        duplicate = (spec, group, digest) in seen
        seen.add((spec, group, digest))
        uncommitted, no_region = _math_flags(details)
        at = sums.get((spec, window))
        if at is None:
            at = sums[(spec, window)] = [order, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0]
        at[1] += 1
        at[2] += len(text)
        at[3] += round(repetition(text) * MICRO)
        at[4] += MICRO * duplicate
        at[5] += MICRO * uncommitted
        at[6] += MICRO * no_region
        terms = shares.get(spec)
        if terms is not None:
            at[7] += round(format_share(details, terms) * MICRO)
        unused, outputs = unused_tool_outputs(text)
        if outputs:
            at[8] += round(unused / outputs * MICRO)
        if spec in citing:
            claim_duplicate, claim_uncited = claim_shares(details)
            at[9] += round(claim_duplicate * MICRO)
            at[10] += round(claim_uncited * MICRO)
        cost, unpriced = item_cost_usd(details)
        at[11] += cost
        at[12] += unpriced
    tally = SignatureTally()
    counters = tally.counters
    for (spec, window), (order, *values) in sums.items():
        named = dict(zip(_SUMS, values, strict=True))
        named["cost"] = round(named["cost"] * NANO)
        # A signature a spec cannot have (no format-only, no citation component) is left out.
        for name in ("format_share",) * (spec not in shares) + CLAIM_SIGNATURES * (
            spec not in citing
        ):
            del named[name]
        tally.windows[(spec, window)] = (order, named)
        for name, amount in named.items():
            key = _COUNTER.get(name, "sig{sep}{spec}{sep}" + name).format(sep=SEP, spec=spec)
            counters[key] = counters.get(key, 0) + amount
    return tally
