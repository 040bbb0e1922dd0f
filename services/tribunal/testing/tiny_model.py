"""A tiny random Qwen3 with a byte-level BPE tokenizer trained on the spot: no model hub, a
few seconds on a CPU. The trainer builds one for its CPU smoke runs (``tiny_model:`` in its
config), and tests and benchmarks build one wherever they need a real model: the judge's and
the citation scorer's transformers backends, TRL's trainer, the log-probability benchmark."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TinyModelConfig:
    """A random Qwen3 built from a config, with a byte-level BPE tokenizer trained on the
    dataset's prompts (for CPU smoke runs and tests; no model hub needed)."""

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 128
    vocab_size: int = 512
    """Target vocabulary of the trained tokenizer."""
    model_vocab_size: int | None = None
    """Embedding rows of the model, if more than the tokenizer's (to reach a model size)."""
    max_position_embeddings: int = 4096
    """Longest sequence (prompt + completion) the model takes, tokens."""


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
