"""The served model's own control tokens: read from its tokenizer files, or named by family.

An OpenAI-compatible server renders its chat template and tokenizes with the model's added
tokens live, but its chat endpoint does not say which they are. :func:`read_added_tokens`
reads them from the files the server loaded (``tokenizer.json``'s ``added_tokens``,
``tokenizer_config.json``'s ``added_tokens_decoder`` and named special tokens), so that a
deployment points ``TRIBUNAL_<SERVICE>_TOKENIZER_PATH`` at them; :func:`tokens_in_config`
reads the same from vLLM's ``GET /tokenizer_info`` (served with
``--enable-tokenizer-info-endpoint``: the tokenizer's config). Where neither is there,
:func:`model_family` names the family a start-up warning reports, and whether the built-in
families (``tribunal.llm.untrusted``) cover it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tribunal.wire.errors import ConfigurationError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
"""The files a tokenizer directory holds its added tokens in (Hugging Face's layout)."""

FAMILIES: tuple[tuple[str, str, bool], ...] = (
    ("qwen", "Qwen (ChatML, <think>, <tool_call>)", True),
    ("llama", "Llama (<|eot_id|>, <|start_header_id|>, [INST])", True),
    ("mistral", "Mistral ([INST], [TOOL_CALLS], [THINK])", True),
    ("mixtral", "Mistral ([INST], [TOOL_CALLS], [THINK])", True),
    ("gemma", "Gemma (<start_of_turn>, <end_of_turn>)", True),
    ("deepseek", "DeepSeek (<｜User｜>, <｜end▁of▁sentence｜>)", True),
    ("glm", "GLM ([gMASK], <sop>, <|user|>)", True),
    ("phi", "Phi (<|user|>, <|end|>)", True),
    ("granite", "Granite (<|start_of_role|>, <|end_of_text|>)", True),
    ("gpt-oss", "gpt-oss harmony (<|start|>, <|channel|>, <|message|>)", True),
    ("command", "Cohere Command (<|START_OF_TURN_TOKEN|>, <BOS_TOKEN>)", False),
    ("aya", "Cohere Command (<|START_OF_TURN_TOKEN|>, <BOS_TOKEN>)", False),
    ("falcon", "Falcon (>>QUESTION<<, >>ANSWER<<)", False),
    ("olmo", "OLMo (<|endoftext|>, <|user|>)", True),
)
"""(lower-case name fragment, family, whether the built-in families cover its template's
control tokens). A model name that matches none is an unknown family."""


def model_family(model: str) -> tuple[str, bool]:
    """Return (the family ``model`` names, whether the built-in families cover it); an
    unknown family is not covered."""
    name = model.lower()
    for fragment, family, covered in FAMILIES:
        if fragment in name:
            return family, covered
    return f"unknown ({model!r})", False


def read_added_tokens(path: str | Path) -> tuple[str, ...]:
    """Return every added token (special or not) a tokenizer's files name, sorted.

    Args:
        path: A ``tokenizer.json`` or ``tokenizer_config.json``, or a directory holding
            either or both (a model's snapshot, as the server loaded it).

    Raises:
        ConfigurationError: No such file, not JSON, or no token in it.
    """
    root = Path(path)
    files = [root / name for name in TOKENIZER_FILES] if root.is_dir() else [root]
    found: set[str] = set()
    read = 0
    for file in files:
        if not file.is_file():
            continue
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"tokenizer file {file} is unreadable: {exc}") from None
        read += 1
        found |= set(_tokens_in(data))
    if not read:
        raise ConfigurationError(f"no tokenizer file at {root} (looked for {TOKENIZER_FILES})")
    if not found:
        raise ConfigurationError(f"the tokenizer files at {root} name no added token")
    return tuple(sorted(found))


def tokens_in_config(data: Any) -> tuple[str, ...]:
    """Return the added tokens a tokenizer config names (a parsed ``tokenizer.json`` or
    ``tokenizer_config.json``, or vLLM's ``/tokenizer_info`` answer, which is the latter),
    sorted; () for anything else."""
    return tuple(sorted(set(_tokens_in(data))))


def _tokens_in(data: Any) -> list[str]:
    """The token strings of one file: ``added_tokens`` (tokenizer.json),
    ``added_tokens_decoder``, ``additional_special_tokens`` and every ``*_token`` entry
    (tokenizer_config.json), each a string or ``{"content": ...}``."""
    if not isinstance(data, dict):
        return []
    entries: list[Any] = []
    added = data.get("added_tokens")
    entries += added if isinstance(added, list) else []
    decoder = data.get("added_tokens_decoder")
    entries += list(decoder.values()) if isinstance(decoder, dict) else []
    extra = data.get("additional_special_tokens")
    entries += extra if isinstance(extra, list) else []
    entries += [v for k, v in data.items() if k.endswith("_token")]
    out = []
    for entry in entries:
        content = entry.get("content") if isinstance(entry, dict) else entry
        if isinstance(content, str) and content:
            out.append(content)
    return out
