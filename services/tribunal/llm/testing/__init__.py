"""Test and benchmark helpers of the LLM backends (a scripted OpenAI-compatible server).

Names are imported lazily so that ``python -m tribunal.llm.testing.fake_openai`` does not
import its own module twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tribunal.llm.testing.fake_openai import FakeOpenAIServer, FakeScript

__all__ = ["FakeOpenAIServer", "FakeScript"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tribunal.llm.testing import fake_openai

        return getattr(fake_openai, name)
    raise AttributeError(name)
