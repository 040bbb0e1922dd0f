"""Fixtures of the judge tests: a real HTTP judge server with scripted verdicts.

``openai_compat_server`` is ``services.judge.testing.fake_openai.FakeOpenAIServer`` on a free
port of 127.0.0.1, in a thread with its own event loop. It stands in for vLLM, which needs a
GPU and weights this machine does not have; everything on our side of the socket is real.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from services.judge.config import BackendConfig, JudgeConfig
from services.judge.testing import FakeJudgeScript, FakeOpenAIServer
from services.judge.verifier import JudgeVerifier


@pytest.fixture
def openai_compat_server() -> Iterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible judge (all verdicts 2 unless the test scripts otherwise)."""
    server = FakeOpenAIServer(FakeJudgeScript())
    server.start()
    try:
        yield server
    finally:
        server.stop()


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
            if name in BackendConfig.__dataclass_fields__:
                backend_fields[name] = overrides.pop(name)
        return JudgeVerifier(JudgeConfig(backend=BackendConfig(**backend_fields), **overrides))

    return make
