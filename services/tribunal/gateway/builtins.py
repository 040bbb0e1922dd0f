"""Built-in components: small rules a spec evaluates in the gateway, without a remote call.

- ``num_turns``: the rollout's number of turns, from the trainer (its ``num_turns`` field:
  verl's reward managers put the agent loop's ``__num_turns__`` into ``extra_info``, which
  the verl adapter merges into the rollout; an OpenRLHF label object can carry it), else
  counted from the conversation as verl's tool agent loop counts turns (the prompt, then one
  assistant turn per generation and one tool turn per call: ``2 + 2 * calls``), where a
  Hermes ``<tool_call>`` counts only when **a tool response follows it in a later turn**
  (a turn marker such as ``<|im_end|>`` / ``<|im_start|>``, ``<|eot_id|>`` or
  ``<end_of_turn>``, then ``<tool_response>``): a call the policy merely typed never ran.
  Without either, the rollout has the fewest turns, 2, and its details say
  ``source: "unknown"``. With it the GRPO-TCR tool-call reward
  ``min(-0.6, score + 0.05 * (num_turns - 2))`` (DemyAgent, Gen-Verse/Open-AgentRL
  ``recipe/demystify/reward.py``: ``(num_turns - 2) / 2 * 0.1``) is a formula.
- ``overlong_penalty``: DAPO's soft overlong punishment (Yu et al. 2025, arXiv 2503.14476,
  Eq. 13) from the response's length in tokens: 0 up to ``max_length - buffer``, then
  falling linearly to ``-1`` at ``max_length``, ``-1`` beyond; times ``factor`` (verl's
  ``overlong_penalty_factor``, default 1). The length is the rollout's ``response_length``
  when the client sends it, else the response's own: its tokens under the Hugging Face
  tokenizer named by the ``tokenizer`` parameter, or without one a conservative estimate
  (:func:`estimate_tokens`: ASCII letters and spaces four to a token, every other character
  one); ``source`` in the details says which.
- ``contains``: 1 if the text holds every string of ``all_of``, else 0 (a format gate).

Each returns ``(reward, details)`` and raises ``BadInput`` when the rollout lacks what it
needs (a fault of the inputs: an error, never a reward of 0).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from tribunal.wire.errors import BadInput, ConfigurationError

# The tokens a conversation's turns are read from, each a fixed string (one linear pass; a
# pattern such as ``<tool_call>.*?</tool_call>`` rescans the rest of the text from every
# unclosed ``<tool_call>``: 38 s for 20,000 of them).
_TOKEN = re.compile(
    r"<tool_call>|</tool_call>|<tool_response>|<\|im_end\|>|<\|im_start\|>|<\|eot_id\|>"
    r"|<\|start_header_id\|>|<end_of_turn>|<start_of_turn>"
)
MAX_TURNS = 100_000
"""The most turns a rollout may claim (a larger ``num_turns`` is bad input, not a reward)."""
MAX_RESPONSE_LENGTH = 10**9
"""The longest ``response_length`` (tokens) a rollout may send."""
BYTES_PER_TOKEN = 4
TURN_MARKERS: dict[str, frozenset[str]] = {
    "chatml": frozenset({"<|im_end|>", "<|im_start|>"}),
    "llama3": frozenset({"<|eot_id|>", "<|start_header_id|>"}),
    "gemma": frozenset({"<end_of_turn>", "<start_of_turn>"}),
}
"""The turn markers of each chat template: only the policy's own (``num_turns``'s
``template``, default ``chatml``) end a turn; other families' are text it typed."""
# ASCII letters and spaces: about four to a token in BPE vocabularies. Everything else
# (digits, punctuation, other scripts) is counted as a token each (the estimate's floor).
_LETTER_RUN = re.compile(r"[A-Za-z ]+")
_CODE_BLOCK = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def _events(text: str, markers: frozenset[str] = TURN_MARKERS["chatml"]) -> list[str]:
    """The conversation's events in order: ``call`` (a complete ``<tool_call>`` block),
    ``turn`` (one of ``markers``: the policy's template's) and ``response`` (a
    ``<tool_response>``); what lies inside a call is part of it."""
    events: list[str] = []
    in_call = False
    for token in _TOKEN.finditer(text):
        name = token.group()
        if in_call:
            if name == "</tool_call>":
                events.append("call")
                in_call = False
        elif name == "<tool_call>":
            in_call = True
        elif name == "<tool_response>":
            events.append("response")
        elif name in markers:
            events.append("turn")
    return events


def count_tool_calls(text: str) -> int:
    """Count complete Hermes ``<tool_call>…</tool_call>`` blocks in ``text`` (typed or run)."""
    return _events(text).count("call")


def count_executed_calls(text: str, template: str = "chatml") -> int:
    """Count the ``<tool_call>`` blocks of ``text`` that a tool answered: a turn boundary of
    ``template`` (:data:`TURN_MARKERS`), then a ``<tool_response>``, before any call of a
    later turn (one linear pass)."""
    executed = pending = 0
    crossed = False
    for event in _events(text, TURN_MARKERS[template]):
        if event == "call":
            if crossed:  # a new turn called again: the earlier calls got no response
                pending, crossed = 0, False
            pending += 1
        elif event == "turn":
            crossed = pending > 0
        elif crossed:
            executed, pending, crossed = executed + pending, 0, False
    return executed


def last_code_block(text: str) -> str:
    """The body of the last fenced code block of ``text`` (any language tag), or ``""``."""
    blocks = _CODE_BLOCK.findall(text)
    return str(blocks[-1]) if blocks else ""


def _int_field(rollout: Mapping[str, Any], name: str, most: int) -> int:
    value = rollout[name]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise BadInput(f"{name}: an integer from 0 to {most}, got {str(value)[:40]}", field=name)
    return value


def num_turns(
    rollout: Mapping[str, Any], params: Mapping[str, Any]
) -> tuple[float, dict[str, Any]]:
    """Return the rollout's number of turns (see the module docstring).

    Details: ``num_turns``, ``source`` (``field``: the trainer's; ``counted``: from tool
    calls that got a response; ``unknown``: neither, counted as 2), and for a count
    ``tool_calls`` (answered) and ``typed_tool_calls`` (all ``<tool_call>`` blocks).

    Raises:
        BadInput: ``num_turns`` is not an integer from 0 to :data:`MAX_TURNS`, or neither it
            nor a string ``response`` is given.
    """
    if rollout.get("num_turns") is not None:
        turns = _int_field(rollout, "num_turns", MAX_TURNS)
        return float(turns), {"num_turns": turns, "source": "field"}
    response = rollout.get("response")
    if not isinstance(response, str):
        raise BadInput("num_turns: give `num_turns` or a `response` to count", field="num_turns")
    calls = count_executed_calls(response, str(params.get("template", "chatml")))
    turns = 2 + 2 * calls
    details = {
        "num_turns": turns,
        "tool_calls": calls,
        "typed_tool_calls": count_tool_calls(response),
        "source": "counted" if calls else "unknown",
    }
    return float(turns), details


def overlong_penalty(
    rollout: Mapping[str, Any], params: Mapping[str, Any]
) -> tuple[float, dict[str, Any]]:
    """Return DAPO's overlong penalty in ``[-factor, 0]``.

    Details: ``response_length`` (tokens), its ``source`` (``field``, ``tokenizer`` or
    ``estimate``), ``max_length`` and ``buffer``.

    Raises:
        BadInput: ``response_length`` is not an integer from 0 to
            :data:`MAX_RESPONSE_LENGTH`, or neither it nor a string ``response`` is given.
        ConfigurationError: The ``tokenizer`` cannot be loaded.
    """
    length, source = _response_length(rollout, params.get("tokenizer"))
    max_length, buffer = int(params["max_length"]), int(params["buffer"])
    factor = float(params.get("factor", 1.0))
    expected = max_length - buffer
    if length <= expected:
        penalty = 0.0
    elif length <= max_length:
        penalty = (expected - length) / buffer
    else:
        penalty = -1.0
    details = {
        "response_length": length,
        "source": source,
        "max_length": max_length,
        "buffer": buffer,
    }
    return penalty * factor, details


def _response_length(rollout: Mapping[str, Any], tokenizer: Any) -> tuple[int, str]:
    """The response's length in tokens and where it came from (see ``overlong_penalty``)."""
    if rollout.get("response_length") is not None:
        return _int_field(rollout, "response_length", MAX_RESPONSE_LENGTH), "field"
    response = rollout.get("response")
    if not isinstance(response, str):
        raise BadInput(
            "overlong_penalty: give `response_length` (tokens) or a `response` to measure",
            field="response_length",
        )
    if tokenizer is not None:
        return len(_tokenizer(str(tokenizer)).encode(response, add_special_tokens=False)), (
            "tokenizer"
        )
    return estimate_tokens(response), "estimate"


def estimate_tokens(text: str) -> int:
    """A conservative token count of ``text`` without a tokenizer (never far below a BPE
    tokenizer's): ASCII letters and spaces at four to a token, every other character a
    token (a digit is a token in Qwen's and Llama 2's vocabularies; ``bytes / 4`` counted
    ``"1234" * n`` four times too low). Linear in ``len(text)``.

    Examples:
        >>> estimate_tokens("1234 5678")
        9
        >>> estimate_tokens("word " * 8)
        10
    """
    others = len(_LETTER_RUN.sub("", text))
    return others + -(-(len(text) - others) // BYTES_PER_TOKEN)


@functools.lru_cache(maxsize=8)
def _tokenizer(name: str) -> Any:
    """A Hugging Face tokenizer by name or path, loaded once (``transformers``).

    Raises:
        ConfigurationError: ``transformers`` is not installed or the tokenizer cannot load.
    """
    try:
        from transformers import AutoTokenizer  # heavy and optional: loaded on first use

        return AutoTokenizer.from_pretrained(name)
    except Exception as exc:  # ImportError, OSError, ValueError: all a setting's fault
        raise ConfigurationError(
            f"overlong_penalty: tokenizer {name!r} cannot be loaded: {type(exc).__name__}: {exc}"
        ) from exc


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
