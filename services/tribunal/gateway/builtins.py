"""Built-in components: small rules a spec evaluates in the gateway, without a remote call.

- ``num_turns``: the rollout's number of turns, from its ``num_turns`` field or counted
  from the Hermes ``<tool_call>`` blocks of its response as verl's tool agent loop counts
  them (the prompt, then one assistant turn per generation and one tool turn per call:
  ``2 + 2 * calls``). With it the GRPO-TCR tool-call reward
  ``min(-0.6, score + 0.05 * (num_turns - 2))`` (DemyAgent, Gen-Verse/Open-AgentRL
  ``recipe/demystify/reward.py``: ``(num_turns - 2) / 2 * 0.1``) is a formula.
- ``overlong_penalty``: DAPO's soft overlong punishment (Yu et al. 2025, arXiv 2503.14476,
  Eq. 13) from the rollout's ``response_length`` in tokens: 0 up to
  ``max_length - buffer``, then falling linearly to ``-1`` at ``max_length``, ``-1`` beyond;
  times ``factor`` (verl's ``overlong_penalty_factor``, default 1).
- ``contains``: 1 if the text holds every string of ``all_of``, else 0 (a format gate).

Each returns ``(reward, details)`` and raises ``BadInput`` when the rollout lacks what it
needs (a fault of the inputs: an error, never a reward of 0).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tribunal.core.errors import BadInput

_TOOL_CALL = re.compile(r"<tool_call>.*?</tool_call>", re.DOTALL)
_CODE_BLOCK = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def count_tool_calls(text: str) -> int:
    """Count complete Hermes ``<tool_call>…</tool_call>`` blocks in ``text``."""
    return len(_TOOL_CALL.findall(text))


def last_code_block(text: str) -> str:
    """The body of the last fenced code block of ``text`` (any language tag), or ``""``."""
    blocks = _CODE_BLOCK.findall(text)
    return str(blocks[-1]) if blocks else ""


def _int_field(rollout: Mapping[str, Any], name: str) -> int:
    value = rollout[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInput(f"{name}: a non-negative integer, got {value!r}", field=name)
    return value


def num_turns(
    rollout: Mapping[str, Any], params: Mapping[str, Any]
) -> tuple[float, dict[str, Any]]:
    """Return the rollout's number of turns (see the module docstring).

    Raises:
        BadInput: ``num_turns`` is not a non-negative integer, or neither it nor a string
            ``response`` is given.
    """
    if rollout.get("num_turns") is not None:
        turns = _int_field(rollout, "num_turns")
        return float(turns), {"num_turns": turns, "source": "field"}
    response = rollout.get("response")
    if not isinstance(response, str):
        raise BadInput("num_turns: give `num_turns` or a `response` to count", field="num_turns")
    calls = count_tool_calls(response)
    turns = 2 + 2 * calls
    return float(turns), {"num_turns": turns, "tool_calls": calls, "source": "counted"}


def overlong_penalty(
    rollout: Mapping[str, Any], params: Mapping[str, Any]
) -> tuple[float, dict[str, Any]]:
    """Return DAPO's overlong penalty in ``[-factor, 0]``.

    Raises:
        BadInput: ``response_length`` is missing or not a non-negative integer.
    """
    if rollout.get("response_length") is None:
        raise BadInput("overlong_penalty needs `response_length` (tokens)", field="response_length")
    length = _int_field(rollout, "response_length")
    max_length, buffer = int(params["max_length"]), int(params["buffer"])
    factor = float(params.get("factor", 1.0))
    expected = max_length - buffer
    if length <= expected:
        penalty = 0.0
    elif length <= max_length:
        penalty = (expected - length) / buffer
    else:
        penalty = -1.0
    details = {"response_length": length, "max_length": max_length, "buffer": buffer}
    return penalty * factor, details


def contains(rollout: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
    """Return 1.0 if the field (default ``response``) holds every string of ``all_of``.

    Raises:
        BadInput: The field is missing or not a string.
    """
    field = str(params.get("field", "response"))
    text = rollout.get(field)
    if not isinstance(text, str):
        raise BadInput(f"{field}: a string is needed for the format check", field=field)
    missing = [s for s in params["all_of"] if s not in text]
    return (0.0 if missing else 1.0), {"missing": missing}


BUILTINS = {"num_turns": num_turns, "overlong_penalty": overlong_penalty, "contains": contains}
"""Built-in name -> function(rollout, params) -> (reward, details)."""
