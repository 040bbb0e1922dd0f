"""Test and benchmark helpers of the judge (a scripted OpenAI-compatible judge server).

Names are imported lazily so that ``python -m tribunal.judge.testing.fake_openai`` does not
import its own module twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tribunal.judge.testing.fake_openai import FakeJudgeScript, FakeOpenAIServer

__all__ = ["FakeJudgeScript", "FakeOpenAIServer"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tribunal.judge.testing import fake_openai

        return getattr(fake_openai, name)
    raise AttributeError(name)
