"""Fixtures of the judge tests: verifiers pointed at ``openai_compat_server`` (a real HTTP
judge server with scripted verdicts, defined in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tribunal.judge.config import JudgeConfig
from tribunal.judge.verifier import JudgeVerifier
from tribunal.llm.config import BackendConfig
from tribunal.llm.testing import FakeOpenAIServer

VerifierFactory = Callable[..., JudgeVerifier]


@pytest.fixture
def make_verifier(openai_compat_server: FakeOpenAIServer) -> VerifierFactory:
    """Build a ``JudgeVerifier`` pointed at the fake server; keyword args override config."""

    def make(**overrides: Any) -> JudgeVerifier:
        backend_fields = {
            "kind": "openai",
            "model": "fake-judge",
            "base_url": openai_compat_server.base_url,
            "max_retries": 2,
            "backoff_s": 0.01,
            "backoff_max_s": 0.05,
            "timeout_s": 5.0,
        }
        for name in list(overrides):
            if name in BackendConfig.model_fields:
                backend_fields[name] = overrides.pop(name)
        return JudgeVerifier(JudgeConfig(backend=BackendConfig(**backend_fields), **overrides))

    return make
