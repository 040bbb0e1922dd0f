"""Tokenizer and model directories: a tiny random Qwen3 with a tokenizer trained on the spot
(no model hub), and the chat-formatted prompts of a dataset."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tribunal.trainer.config import GRPOConfig, TinyModelConfig

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EXTRA_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "\\boxed"]


def build_tiny_model(tiny: TinyModelConfig, texts: Sequence[str], out_dir: Path, seed: int) -> Path:
    """Train a byte-level BPE tokenizer on ``texts`` and save it with a random Qwen3.

    The model has Hugging Face's initialisation (``from_config``), tied embeddings, EOS
    ``<|im_end|>`` and pad ``<|endoftext|>``; both are saved to ``out_dir``.

    Args:
        tiny: model sizes and target vocabulary.
        texts: training text for the tokenizer (the dataset's prompts).
        out_dir: where to save.
        seed: initialisation seed.

    Returns:
        ``out_dir``.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=tiny.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator([*texts, *EXTRA_TOKENS], trainer)
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.add_tokens(EXTRA_TOKENS)
    tokenizer.chat_template = CHAT_TEMPLATE
    config = Qwen3Config(
        vocab_size=max(len(tokenizer), tiny.model_vocab_size or 0),
        hidden_size=tiny.hidden_size,
        intermediate_size=tiny.intermediate_size,
        num_hidden_layers=tiny.num_layers,
        num_attention_heads=tiny.num_heads,
        num_key_value_heads=tiny.num_kv_heads,
        head_dim=tiny.head_dim,
        max_position_embeddings=tiny.max_position_embeddings,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


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
