"""Settings of the citation service: the core's ``TRIBUNAL_*`` plus ``TRIBUNAL_CITATION_*``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

from tribunal.citation.config import CitationConfig
from tribunal.citation.judge import JudgeModeConfig
from tribunal.citation.lexical import LexicalThresholds
from tribunal.core.layout import cores_per_worker
from tribunal.core.settings import CoreSettings
from tribunal.llm import BackendConfig
from tribunal.llm.config import gather_backend

_LEXICAL = "lexical_"


class CitationServiceConfig(CitationConfig):
    """``TRIBUNAL_CITATION_<FIELD>``: every field of ``CitationConfig``, of the judge mode's
    LLM backend (``BackendConfig``) and of its calls (``JudgeModeConfig``), plus the port.

    The groups' fields are written flat and gathered here: ``TRIBUNAL_CITATION_BASE_URL`` is
    ``backend.base_url``, ``TRIBUNAL_CITATION_CLAIMS_PER_CALL`` is ``judge.claims_per_call``,
    ``TRIBUNAL_CITATION_LEXICAL_FULL`` is ``lexical.full``; ``TRIBUNAL_CITATION_BACKEND``
    names the backend's kind (``tribunal.llm.config.gather_backend``: the kind and model when
    unset, as for the judge); the backend asks for no log-probabilities unless told to (the
    verdicts are categorical).
    Unset support mode: ``judge`` when a backend is configured, else ``lexical``.
    """

    port: int | None = Field(default=None, description="Port of the citation API (default 8104).")
    check_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Hard deadline of one item's parsing and checks in a scoring process (the "
        "process is killed past it; model calls are not counted).",
    )
    processes: int = Field(
        default=0,
        ge=0,
        validate_default=True,
        description="Scoring processes per worker: every item's parsing, checks and lexical "
        "judgment run in them, smallest item first (never on the worker's event loop); "
        "0 = one per core.",
    )
    backend: Annotated[BackendConfig, NoDecode] = Field(
        default_factory=BackendConfig, description="LLM backend of the judge mode (tribunal.llm)."
    )
    judge: JudgeModeConfig = Field(
        default_factory=JudgeModeConfig, description="How the judge mode calls the model."
    )
    nli_model: str | None = Field(
        default=None,
        description="Local directory of the nli support mode's sequence-classification model "
        "(an NLI cross-encoder whose labels name entailment); unset: items asking for nli get "
        "backend_unavailable.",
    )

    @field_validator("processes")
    @classmethod
    def _zero_is_one_per_core(cls, processes: int) -> int:
        return processes or cores_per_worker(1)

    @model_validator(mode="before")
    @classmethod
    def _gather_groups(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        backend = gather_backend(data)
        judge = _group(data.pop("judge", None), JudgeModeConfig)
        lexical = _group(data.pop("lexical", None), LexicalThresholds)
        for name in list(data):
            if name in JudgeModeConfig.model_fields:
                judge[name] = data.pop(name)
            elif name.startswith(_LEXICAL):
                lexical[name.removeprefix(_LEXICAL)] = data.pop(name)
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


def _group(value: Any, model: type[Any]) -> dict[str, Any]:
    """A group given as a model, a dict or nothing."""
    if isinstance(value, model):
        return {name: getattr(value, name) for name in model.model_fields}
    return dict(value) if isinstance(value, dict) else {}


class CitationSettings(CoreSettings):
    """The citation service's settings."""

    citation: CitationServiceConfig = Field(default_factory=CitationServiceConfig)
