"""Citation verifier library: claim-level citation precision, recall and F1.

``parse_answer`` reads the claims of an answer's final ``<answer>`` block, ``gather_evidence``
the snippets it may cite (from the request only); ``tribunal.citation.gates`` checks size,
format and ids before any model call; ``tribunal.citation.content`` reads what a claim
asserts (numbers, entities, negation, direction) for the lexical mode and the judge mode's
gate; ``tribunal.citation.scorer`` holds the reward formula (DR Tulu's preset and ours).
"""

from tribunal.citation.evidence import gather_evidence, harvest_snippets
from tribunal.citation.parse import Claim, ParsedAnswer, parse_answer
from tribunal.citation.scorer import PRESETS, Preset

__all__ = [
    "PRESETS",
    "Claim",
    "ParsedAnswer",
    "Preset",
    "gather_evidence",
    "harvest_snippets",
    "parse_answer",
]
