"""Static rubric sets: named, versioned YAML files shipped as package data.

A set is asked for by name (``"v3"``) or pinned to a revision (``"v3@1"``); the file
``<name>.yaml`` beside this module holds ``name``, ``revision``, ``description`` and
``rubrics`` (``title``, ``polarity``, ``weight``, ``text``). Each rubric of a set carries
``source="<name>@<revision>"`` so details say where it came from.
"""

from __future__ import annotations

import functools
import importlib.resources
from dataclasses import dataclass
from typing import Any

from tribunal.wire.rubrics import Polarity, Rubric

__all__ = ["RubricSet", "available_rubric_sets", "load_rubric_set", "rubric_sets_digest"]


@dataclass(frozen=True)
class RubricSet:
    """A named, versioned list of rubrics."""

    name: str
    revision: int
    description: str
    rubrics: tuple[Rubric, ...]

    @property
    def ref(self) -> str:
        """``<name>@<revision>``, the set's id in details and cache payloads."""
        return f"{self.name}@{self.revision}"


@functools.cache
def available_rubric_sets() -> tuple[str, ...]:
    """Return the names of the shipped sets, sorted."""
    root = importlib.resources.files(__name__)
    return tuple(
        sorted(p.name.removesuffix(".yaml") for p in root.iterdir() if p.name.endswith(".yaml"))
    )


@functools.cache
def _load(name: str) -> RubricSet:
    import yaml  # here, not at the top: the item schema (pydantic alone) imports this module

    text = importlib.resources.files(__name__).joinpath(f"{name}.yaml").read_text("utf-8")
    raw: dict[str, Any] = yaml.safe_load(text)
    if raw.get("name") != name:
        raise ValueError(f"rubric set file {name}.yaml names itself {raw.get('name')!r}")
    revision = int(raw["revision"])
    ref = f"{name}@{revision}"
    rubrics = tuple(
        Rubric(
            text=" ".join(str(r["text"]).split()),
            polarity=Polarity(r["polarity"]),
            weight=float(r.get("weight", 1.0)),
            title=r.get("title"),
            source=ref,
        )
        for r in raw["rubrics"]
    )
    return RubricSet(name, revision, " ".join(str(raw.get("description", "")).split()), rubrics)


def load_rubric_set(spec: str) -> RubricSet:
    """Load a set by ``name`` or ``name@revision``.

    Args:
        spec: ``"v3"`` or ``"v3@1"``.

    Returns:
        The set (cached after the first load).

    Raises:
        KeyError: No shipped set has this name, or its revision differs from the pin.
    """
    name, _, pin = spec.partition("@")
    if name not in available_rubric_sets():
        raise KeyError(
            f"unknown rubric set {spec!r}; available: {', '.join(available_rubric_sets())}"
        )
    rubric_set = _load(name)
    if pin and pin != str(rubric_set.revision):
        raise KeyError(f"rubric set {name!r} is at revision {rubric_set.revision}, not {pin!r}")
    return rubric_set


def rubric_sets_digest() -> dict[str, Any]:
    """Return every shipped set's full content, for the verifier's config hash."""
    return {
        name: {
            "revision": s.revision,
            "rubrics": [r.to_dict() for r in s.rubrics],
        }
        for name in available_rubric_sets()
        for s in [load_rubric_set(name)]
    }
