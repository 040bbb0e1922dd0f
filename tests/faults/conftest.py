"""Fixtures of the fault tests: a ``Stack`` (Redis with AOF + Tribunal processes) that is torn
down whatever happened, with its logs printed when the test failed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.fault_scenarios import Stack


@pytest.fixture
def make_stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Stack]]:
    """Factory: ``make_stack(**env)`` returns a ``Stack`` (nothing started yet)."""
    stacks: list[Stack] = []

    def make(**env: str) -> Stack:
        stack = Stack(tmp_path / f"stack{len(stacks)}", env=env)
        stacks.append(stack)
        return stack

    yield make
    failed = getattr(request.node, "rep_call", None)
    for stack in stacks:
        stack.close()
        if failed is not None and failed.failed:
            print(stack.log_text())
