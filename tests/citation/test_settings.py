"""``CitationSettings``: defaults, the backend it builds, and the judge's model as default."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tribunal.citation.api import create_verifiers
from tribunal.citation.settings import CitationSettings
from tribunal.citation.verifier import CitationVerifier
from tribunal.judge.settings import JudgeSettings
from tribunal.llm.config import DEFAULT_OPENAI_MODEL


def test_without_a_backend_the_default_mode_is_lexical_and_judge_is_unavailable() -> None:
    settings = CitationSettings()
    assert settings.citation.config().support == "lexical"
    assert settings.citation.backend.kind == "none"
    [verifier] = create_verifiers(settings)
    assert isinstance(verifier, CitationVerifier) and verifier.judge is None


def test_a_base_url_makes_judge_the_default_on_the_judges_model() -> None:
    settings = CitationSettings(citation={"base_url": "http://127.0.0.1:9/v1"})
    backend = settings.citation.backend
    assert (backend.kind, backend.model, backend.logprobs) == (
        "openai",
        DEFAULT_OPENAI_MODEL,
        False,
    )
    assert settings.citation.config().support == "judge"
    judge = JudgeSettings(judge={"base_url": "http://127.0.0.1:9/v1"}).judge.backend
    assert backend.model == judge.model  # the judge service's default model
    [verifier] = create_verifiers(settings)
    assert isinstance(verifier, CitationVerifier) and verifier.judge is not None
    plain = create_verifiers(CitationSettings())[0]
    assert verifier.config_hash() != plain.config_hash()


def test_weights_of_the_tribunal_preset_are_configurable_and_checked() -> None:
    config = CitationSettings(citation={"valid_id_weight": 0.25}).citation.config()
    tribunal = config.preset_named("tribunal")
    assert (tribunal.f1_weight, tribunal.valid_id_weight) == (0.75, 0.25)
    assert config.preset_named("dr_tulu").valid_id_weight == 0.4  # as published
    with pytest.raises(ValueError, match="must be 1"):
        CitationSettings(citation={"f1_weight": 0.9, "valid_id_weight": 0.9})
    with pytest.raises(ValidationError):
        CitationSettings(citation={"preset": "alce"})
