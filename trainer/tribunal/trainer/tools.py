"""The multi-turn ``code_interpreter`` tool loop of tcr_agent (Hermes tool-call format).

The policy writes ``<tool_call>{"name": "code_interpreter", "arguments": {"code": "..."}}
</tool_call>``; the loop stops generation there, runs the code through the code service's
``POST /v1/code/run``, appends the output as a tool turn (``<tool_response>`` inside a user
turn, Qwen's Hermes template) whose tokens are masked out of the loss, and lets the policy go
on, up to ``max_turns`` assistant turns or the response budget.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tribunal.client import APIError, SyncTribunalClient, TransportError
from tribunal.trainer.rollout import Completion, GenerationBackend
from tribunal.wire.code import RunItem
from tribunal.wire.code_verdicts import TestVerdict

TOOL_NAME = "code_interpreter"
_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def parse_tool_call(text: str) -> str | None:
    """Return the code of the last Hermes ``code_interpreter`` call in ``text``, or None.

    Args:
        text: one assistant turn.

    Returns:
        The ``arguments.code`` string; None when there is no call, the JSON is invalid, or it
        names another tool.

    Examples:
        >>> parse_tool_call('<tool_call>{"name": "code_interpreter", '
        ...                 '"arguments": {"code": "print(1)"}}</tool_call>')
        'print(1)'
    """
    matches = _TOOL_CALL.findall(text)
    if not matches:
        return None
    try:
        call = json.loads(matches[-1])
    except json.JSONDecodeError:
        return None
    if not isinstance(call, dict) or call.get("name") != TOOL_NAME:
        return None
    arguments = call.get("arguments")
    code = arguments.get("code") if isinstance(arguments, dict) else None
    return code if isinstance(code, str) else None


class CodeRunner:
    """Runs tool code through the code service's ``POST /v1/code/run`` (``run_code`` of
    ``tribunal.client``), in its sandbox.

    Args:
        code_url: base URL of the code service.
        timeout_s: HTTP timeout per call, for each phase (connect, read, write, pool).
        max_output_chars: output kept for the tool turn.
    """

    def __init__(self, code_url: str, timeout_s: float = 30.0, max_output_chars: int = 2000):
        # One attempt per call: a failure reaches the policy as a tool turn at once, and a
        # call never outlasts timeout_s per phase (retries would multiply it).
        self._client = SyncTribunalClient(code_url, timeout=timeout_s, max_retries=0)
        self.max_output_chars = max_output_chars

    def run(self, code: str) -> str:
        """Run Python ``code``; return what the tool turn shows (stdout, stderr, or an error).

        A failed call (code the service would refuse, service down, timeout, 4xx/5xx)
        becomes a tool turn that says so: the policy sees the failure as a tool would report
        it; nothing is raised.
        """
        try:
            item = RunItem(id="tool_call", language="python", code=code)
        except ValidationError as exc:  # a lone surrogate (JSON can escape one), over 1 MiB
            return f"error: the code interpreter refused the code ({exc.errors()[0]['msg']})"
        try:
            details = self._client.run_code(item)
        except TransportError as exc:
            return f"error: the code interpreter is unavailable ({type(exc.__cause__).__name__})"
        except APIError as exc:
            return f"error: the code interpreter answered {exc.status}"
        out = details.stdout
        if details.stderr:
            out += ("\n" if out else "") + details.stderr
        if details.verdict is not TestVerdict.ACCEPTED and not out:
            out = f"error: {details.verdict}"
        return out.rstrip("\n")[: self.max_output_chars]

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()


@dataclass
class ToolLoop:
    """Multi-turn rollouts with the code interpreter.

    Args:
        backend: generation backend (stops at ``</tool_call>``).
        tokenizer: encodes tool turns, decodes completions.
        runner: runs the code.
        max_turns: most assistant turns.
        max_response_tokens: budget for all tokens after the prompt (tool output included).
    """

    backend: GenerationBackend
    tokenizer: Any
    runner: CodeRunner
    max_turns: int
    max_response_tokens: int

    def complete(self, prompt_ids: list[int], n: int, seed: int) -> list[Completion]:
        """Return ``n`` multi-turn completions (each continued on its own)."""
        return [self._one(prompt_ids, seed * 31 + i) for i in range(n)]

    def _tool_turn(self, output: str) -> list[int]:
        text = f"<|im_end|>\n<|im_start|>user\n<tool_response>\n{output}\n</tool_response>"
        text += "<|im_end|>\n<|im_start|>assistant\n"
        ids: list[int] = self.tokenizer.encode(text, add_special_tokens=False)
        return ids

    def _one(self, prompt_ids: list[int], seed: int) -> Completion:
        tokens: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        turns = calls = 0
        truncated = False
        while turns < self.max_turns:
            budget = self.max_response_tokens - len(tokens)
            if budget <= 0:
                truncated = True
                break
            (gen,) = self.backend.generate(
                prompt_ids + tokens, 1, budget, seed + turns, stop=("</tool_call>",)
            )
            turns += 1
            tokens += gen.token_ids
            mask += [1] * len(gen.token_ids)
            logprobs += gen.logprobs
            if gen.finish_reason == "length":
                truncated = True
                break
            code = parse_tool_call(self.tokenizer.decode(gen.token_ids))
            if gen.finish_reason == "eos" or code is None or turns >= self.max_turns:
                break
            calls += 1
            tool = self._tool_turn(self.runner.run(code))[: self.max_response_tokens - len(tokens)]
            tokens += tool
            mask += [0] * len(tool)
            logprobs += [0.0] * len(tool)
        return Completion(
            token_ids=tokens,
            loss_mask=mask,
            old_logprobs=logprobs,
            text=self.tokenizer.decode(tokens, skip_special_tokens=False),
            is_truncated=truncated,
            num_turns=turns,
            tool_calls=calls,
        )
