"""JudgeSettings: TRIBUNAL_JUDGE_* environment -> JudgeConfig."""

from __future__ import annotations

import pytest

from tribunal.judge.settings import JudgeSettings
from tribunal.llm.config import DEFAULT_OPENAI_MODEL


def test_defaults_mean_no_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TRIBUNAL_JUDGE_BACKEND", "TRIBUNAL_JUDGE_BASE_URL", "TRIBUNAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    config = JudgeSettings().judge.config()
    assert config.backend.kind == "none" and config.rubrics_per_call == 1


def test_env(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "TRIBUNAL_JUDGE_BASE_URL": "http://127.0.0.1:8000/v1",
        "TRIBUNAL_JUDGE_API_KEY": "sk-x",
        "TRIBUNAL_JUDGE_MAX_CONCURRENCY": "128",
        "TRIBUNAL_JUDGE_RUBRICS_PER_CALL": "4",
        "TRIBUNAL_JUDGE_AGGREGATION": "dr_tulu",
        "TRIBUNAL_JUDGE_DEFAULT_RUBRIC_SETS": '["v3"]',
        "TRIBUNAL_JUDGE_CHAT_TEMPLATE_KWARGS": "{}",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    config = JudgeSettings().judge.config()
    assert config.backend.kind == "openai" and config.backend.model == DEFAULT_OPENAI_MODEL
    assert config.backend.api_key == "sk-x" and config.backend.max_concurrency == 128
    assert config.backend.chat_template_kwargs == ()
    assert (config.rubrics_per_call, config.aggregation) == (4, "dr_tulu")
    assert config.default_rubric_sets == ("v3",)
    assert "sk-x" not in repr(config) and "sk-x" not in str(config.hash_payload())


def test_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUNAL_JUDGE_BACKEND", "transformers")
    monkeypatch.setenv("TRIBUNAL_JUDGE_MODEL", "/models/tiny")
    backend = JudgeSettings().judge.config().backend
    assert (backend.kind, backend.model, backend.device) == ("transformers", "/models/tiny", "cpu")
