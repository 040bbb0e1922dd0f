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
  null: a ``<think>`` never closed).

:func:`batch_signatures` tallies them as counters (``sig|<spec>|<signature>`` sums, in
millionths except ``length`` in characters, and ``sig|<spec>|items``), which the gateway adds
to its cluster-wide stats: ``tribunal_spec_signature_total`` and
``tribunal_spec_signature_items_total`` in /metrics, whose ratio over a range is the mean, and
the shipped rule ``TribunalSignatureDrift`` compares it with a longer baseline. The work grows
with the responses' size, so the gateway runs it in a thread after the answer
(``tribunal.gateway.audit.Auditor``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from tribunal.core.metrics import MICRO, SEP

SIGNATURES = ("length", "repetition", "duplicate", "uncommitted", "no_region")
"""The signatures counted, in the order of the docs."""

NGRAM = 4
"""Words per n-gram of ``repetition``."""


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


def batch_signatures(rows: Iterable[tuple[str, str, Any, Mapping[str, Any]]]) -> dict[str, int]:
    """The counters of a batch's spec items.

    Args:
        rows: ``(spec, group, response, result details)`` per scored spec item (``response``
            as the rollout gave it: a non-string counts as length 0).

    Returns:
        ``{"sig|<spec>|<signature>": sum, "sig|<spec>|items": n}``: sums in millionths, but
        ``length`` in characters.
    """
    counters: dict[str, int] = {}
    seen: set[tuple[str, str, bytes]] = set()

    def add(spec: str, name: str, amount: int) -> None:
        key = f"sig{SEP}{spec}{SEP}{name}"
        counters[key] = counters.get(key, 0) + amount

    for spec, group, response, details in rows:
        text = response if isinstance(response, str) else ""
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        duplicate = (spec, group, digest) in seen
        seen.add((spec, group, digest))
        uncommitted, no_region = _math_flags(details)
        add(spec, "items", 1)
        add(spec, "length", len(text))
        add(spec, "repetition", round(repetition(text) * MICRO))
        add(spec, "duplicate", MICRO * duplicate)
        add(spec, "uncommitted", MICRO * uncommitted)
        add(spec, "no_region", MICRO * no_region)
    return counters
