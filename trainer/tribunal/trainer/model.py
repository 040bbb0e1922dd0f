"""A dataset's rows and their chat-formatted prompts (the tiny model the trainer can build
instead of loading one is ``tribunal.testing.tiny_model``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tribunal.trainer.config import GRPOConfig


def load_rows(path: str, limit: int | None) -> list[dict[str, Any]]:
    """Rows of a local JSONL or Parquet file, read with Hugging Face ``datasets``.

    Raises:
        ValueError: the file is neither ``.jsonl``/``.json`` nor ``.parquet``.
    """
    import datasets

    builder = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}.get(Path(path).suffix)
    if builder is None:
        raise ValueError(f"dataset {path}: use a .jsonl, .json or .parquet file")
    table = datasets.load_dataset(builder, data_files=path, split="train")
    if limit is not None:
        table = table.select(range(min(limit, len(table))))
    return [dict(row) for row in table]


def prompt_ids(config: GRPOConfig, tokenizer: Any, row: dict[str, Any]) -> list[int]:
    """The row's prompt as chat tokens (system prompt first), cut on the left to
    ``max_prompt_tokens``."""
    messages = []
    if config.system_prompt:
        messages.append({"role": "system", "content": config.system_prompt})
    messages.append({"role": "user", "content": str(row[config.prompt_field])})
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids: list[int] = tokenizer.encode(text, add_special_tokens=False)
    return ids[-config.max_prompt_tokens :]
