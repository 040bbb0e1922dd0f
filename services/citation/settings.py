"""Settings of the citation service: the core's ``TRIBUNAL_*`` plus ``TRIBUNAL_CITATION_*``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator
from pydantic_settings import NoDecode

from tribunal.citation.config import CitationConfig
from tribunal.citation.judge import JudgeSettings
from tribunal.citation.lexical import LexicalThresholds
from tribunal.core.settings import CoreSettings
from tribunal.llm import BackendConfig

DEFAULT_OPENAI_MODEL = "Qwen/Qwen3.5-35B-A3B"
"""The judge's default model (``tribunal.judge.settings``; a verifier never imports another,
so ``tests/citation/test_settings.py`` checks that the two agree)."""

_LEXICAL = "lexical_"


class CitationServiceConfig(CitationConfig):
    """``TRIBUNAL_CITATION_<FIELD>``: every field of ``CitationConfig``, of the judge mode's
    LLM backend (``BackendConfig``) and of its calls (``JudgeSettings``), plus the port.

    The groups' fields are written flat and gathered here: ``TRIBUNAL_CITATION_BASE_URL`` is
    ``backend.base_url``, ``TRIBUNAL_CITATION_CLAIMS_PER_CALL`` is ``judge.claims_per_call``,
    ``TRIBUNAL_CITATION_LEXICAL_FULL`` is ``lexical.full``; ``TRIBUNAL_CITATION_BACKEND``
    names the backend's kind. Unset kind: ``openai`` when a base URL is given, else ``none``
    (an openai backend without a model serves the judge's, ``DEFAULT_OPENAI_MODEL``); the
    backend asks for no log-probabilities unless told to (the verdicts are categorical).
    Unset support mode: ``judge`` when a backend is configured, else ``lexical``.
    """

    port: int | None = Field(default=None, description="Port of the citation API (default 8104).")
    backend: Annotated[BackendConfig, NoDecode] = Field(
        default_factory=BackendConfig, description="LLM backend of the judge mode (tribunal.llm)."
    )
    judge: JudgeSettings = Field(
        default_factory=JudgeSettings, description="How the judge mode calls the model."
    )

    @model_validator(mode="before")
    @classmethod
    def _gather_groups(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        backend = _group(data.pop("backend", None), BackendConfig, as_kind=True)
        judge = _group(data.pop("judge", None), JudgeSettings)
        lexical = _group(data.pop("lexical", None), LexicalThresholds)
        for name in list(data):
            if name in BackendConfig.model_fields:
                backend[name] = data.pop(name)
            elif name in JudgeSettings.model_fields:
                judge[name] = data.pop(name)
            elif name.startswith(_LEXICAL):
                lexical[name.removeprefix(_LEXICAL)] = data.pop(name)
        if backend.get("kind") is None:
            backend["kind"] = "openai" if backend.get("base_url") else "none"
        if backend["kind"] == "openai" and not backend.get("model"):
            backend["model"] = DEFAULT_OPENAI_MODEL
        backend.setdefault("logprobs", False)
        if data.get("support") is None:
            data["support"] = "judge" if backend["kind"] != "none" else "lexical"
        return {**data, "backend": backend, "judge": judge, "lexical": lexical}

    def config(self) -> CitationConfig:
        """The verifier's configuration: the ``CitationConfig`` fields of these settings."""
        return CitationConfig(**{name: getattr(self, name) for name in CitationConfig.model_fields})

    def judge_hash(self) -> dict[str, Any]:
        """What of the judge mode can move a reward, for the verifier's ``config_hash``."""
        return {
            "backend": self.backend.hash_payload(),
            "claims_per_call": self.judge.claims_per_call,
        }


def _group(value: Any, model: type[Any], as_kind: bool = False) -> dict[str, Any]:
    """A group given as a model, a dict, nothing, or (``as_kind``) the backend's kind."""
    if isinstance(value, model):
        return {name: getattr(value, name) for name in model.model_fields}
    if isinstance(value, dict):
        return dict(value)
    return {"kind": value} if as_kind and value is not None else {}


class CitationSettings(CoreSettings):
    """The citation service's settings."""

    citation: CitationServiceConfig = Field(default_factory=CitationServiceConfig)
