"""Domain configuration of the citation verifier: frozen dataclasses, hashable.

Everything that can move a reward is in :meth:`CitationConfig.hash_payload` and so in the
verifier's ``config_hash``; capacity knobs (cache size) are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tribunal.citation.lexical import LexicalThresholds
from tribunal.citation.schemas import SupportMode
from tribunal.citation.scorer import PRESETS, Preset, PresetName


@dataclass(frozen=True)
class CitationConfig:
    """How citations are checked and scored.

    Attributes:
        support: Mode used when an item does not choose one (``judge`` | ``lexical`` |
            ``none``).
        preset: Reward formula used when an item does not choose one.
        f1_weight: Overrides the ``tribunal`` preset's F1 weight (None: 1.0).
        valid_id_weight: Overrides the ``tribunal`` preset's valid-id weight (None: 0.0);
            the two must sum to 1. The ``dr_tulu`` preset stays as published.
        lexical: Thresholds of the ``lexical`` mode.
    """

    support: SupportMode = "lexical"
    preset: PresetName = "tribunal"
    f1_weight: float | None = None
    valid_id_weight: float | None = None
    lexical: LexicalThresholds = field(default_factory=LexicalThresholds)

    def __post_init__(self) -> None:
        self.preset_named("tribunal")  # weights are checked here, at start-up

    def preset_named(self, name: PresetName) -> Preset:
        """Return the preset ``name`` with this configuration's weight overrides.

        Raises:
            ValueError: The overridden weights do not sum to 1.
        """
        preset = PRESETS[name]
        if name != "tribunal" or (self.f1_weight is None and self.valid_id_weight is None):
            return preset
        f1 = self.f1_weight if self.f1_weight is not None else 1.0 - (self.valid_id_weight or 0.0)
        valid = self.valid_id_weight if self.valid_id_weight is not None else 1.0 - f1
        return replace(preset, f1_weight=f1, valid_id_weight=valid)

    def hash_payload(self) -> dict[str, Any]:
        """Return everything that can move a reward, for ``config_hash``."""
        tribunal = self.preset_named("tribunal")
        return {
            "support": self.support,
            "preset": self.preset,
            "weights": [tribunal.f1_weight, tribunal.valid_id_weight],
            "lexical": [self.lexical.full, self.lexical.partial, self.lexical.relevant],
        }
