"""Fixtures of the code runner's library tests: started verifiers (real bubblewrap sandboxes).

No mocks: every test runs programs in real sandboxes. Each fixture claims its own block of
slot uids, so the checks for leftover processes (by uid) only see this test's sandboxes.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator

import pytest

from tribunal.code import CodeConfig, CodeRunVerifier, CodeVerifier

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.fixture
async def code_verifier() -> AsyncIterator[CodeVerifier]:
    verifier = CodeVerifier(CodeConfig(slots=2, default_timeout_s=3.0))
    await verifier.start()
    yield verifier
    await verifier.aclose()


@pytest.fixture
async def run_verifier() -> AsyncIterator[CodeRunVerifier]:
    verifier = CodeRunVerifier(CodeConfig(slots=2, default_timeout_s=3.0))
    await verifier.start()
    yield verifier
    await verifier.aclose()


@pytest.fixture
async def bare_code_verifier() -> AsyncIterator[CodeVerifier]:
    """A scoring verifier without the seccomp layer: what the other layers stop alone."""
    verifier = CodeVerifier(CodeConfig(slots=2, default_timeout_s=3.0, seccomp=False))
    await verifier.start()
    yield verifier
    await verifier.aclose()


@pytest.fixture
async def bare_run_verifier() -> AsyncIterator[CodeRunVerifier]:
    """A run verifier without the seccomp layer."""
    verifier = CodeRunVerifier(CodeConfig(slots=2, default_timeout_s=3.0, seccomp=False))
    await verifier.start()
    yield verifier
    await verifier.aclose()
