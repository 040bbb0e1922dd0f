"""A sandbox that ends without answering says how it ended (issue 35, item 11): a driver killed
from outside (as the host's OOM killer kills the process with the highest ``oom_score_adj``)
is a ``SandboxError`` naming the signal, so that a flake under load points at its cause."""

from __future__ import annotations

import os
import signal

import pytest

from tribunal.code import CodeVerifier
from tribunal.code.sandbox import SandboxError


async def test_a_driver_killed_from_outside_names_the_signal(code_verifier: CodeVerifier) -> None:
    runner = code_verifier._runner
    assert runner is not None
    session = await runner._new_session(None)
    try:
        assert session.end_reason() == "still running"
        assert session._proc is not None
        os.killpg(session._proc.pid, signal.SIGKILL)
        message = r"^the sandbox driver ended without answering \(killed by SIGKILL\): no output$"
        with pytest.raises(SandboxError, match=message):
            await session.receive(timeout_s=10)
    finally:
        await session.close()
