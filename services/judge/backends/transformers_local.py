"""In-process judge on a Hugging Face ``transformers`` causal LM (CPU use, tests, laptops).

Constrained decoding by construction: the backend writes the verdict JSON itself and lets
the model choose only the verdict digits. For each key it feeds
``{"rK": {"reason": "", "verdict": `` after the chat-templated prompt, restricts the
next-token distribution to the tokens ``0``, ``1``, ``2`` (log-softmax over those three
logits), takes the most likely level and feeds it, reusing the KV cache across keys. The
returned :class:`Completion` carries those restricted log-probabilities on the verdict
tokens, so ``tribunal.judge.verdict`` computes the same expected score as for a vLLM
answer. Even a random model gives a valid score in [0, 1]. No reason is generated (free
text from a small CPU model costs seconds and says little).

torch and transformers are imported in :meth:`TransformersBackend.start` only: importing
this module (or the judge service) does not load torch. Weights are loaded with
``local_files_only=True``: nothing is downloaded.

Known issues: calls run one at a time (one model, CPU-bound, in a worker thread);
``temperature`` is ignored (the choice is always the argmax level).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from tribunal.core.errors import BadInput, ConfigurationError
from tribunal.judge.backends.base import Completion, CompletionRequest, TokenLogprob
from tribunal.judge.config import BackendConfig
from tribunal.judge.prompts import VERDICT_LEVELS


class TransformersBackend:
    """A local causal LM as the judge.

    Args:
        config: ``model`` is a local directory (or a cached hub id); ``device`` a torch device.
    """

    kind = "transformers"

    def __init__(self, config: BackendConfig) -> None:
        self.config = config
        self.model = config.model
        self._lm: Any = None
        self._tokenizer: Any = None
        self._digit_ids: list[int] = []
        self._max_positions: int | None = None
        self._lock = threading.Lock()

    async def start(self) -> None:
        """Load tokenizer and weights (in a thread; this can take seconds).

        Raises:
            ConfigurationError: torch / transformers missing, the model cannot be loaded, or
                the tokenizer does not have single tokens for the verdict digits.
        """
        if self._lm is None:
            await asyncio.to_thread(self._load)

    def _load(self) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise ConfigurationError(
                "the transformers judge backend needs torch and transformers "
                "(pip install 'tribunal[judge-local]')"
            ) from exc
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.model, local_files_only=True)
            lm: Any = AutoModelForCausalLM.from_pretrained(
                self.model, local_files_only=True, dtype=torch.float32
            )
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot load judge model {self.model!r}: {exc}") from exc
        digit_ids = []
        for level in VERDICT_LEVELS:
            ids = tokenizer.encode(str(level), add_special_tokens=False)
            if len(ids) != 1:
                raise ConfigurationError(f"verdict {level} is not one token for {self.model!r}")
            digit_ids.append(int(ids[0]))
        self._tokenizer = tokenizer
        self._lm = lm.to(self.config.device).eval()
        self._digit_ids = digit_ids
        self._max_positions = getattr(lm.config, "max_position_embeddings", None)

    async def aclose(self) -> None:
        """Drop the model."""
        self._lm = None
        self._tokenizer = None

    async def complete(self, request: CompletionRequest) -> Completion:
        """Judge one call (in a worker thread; one call at a time).

        Raises:
            BadInput: The prompt is longer than the model's context.
        """
        if self._lm is None:
            await self.start()
        return await asyncio.to_thread(self._complete_locked, request)

    def _complete_locked(self, request: CompletionRequest) -> Completion:
        with self._lock:
            return self._complete(request)

    def _encode(self, text: str) -> Any:
        return self._tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids.to(
            self.config.device
        )

    def _complete(self, request: CompletionRequest) -> Completion:
        import torch

        prompt = self._tokenizer.apply_chat_template(
            request.prompt.messages(),
            tokenize=False,
            add_generation_prompt=True,
            **dict(self.config.chat_template_kwargs),
        )
        prompt_ids = self._encode(prompt)
        n_prompt = int(prompt_ids.shape[1])
        keys = request.prompt.keys
        if self._max_positions and n_prompt + 16 * len(keys) > self._max_positions:
            raise BadInput(
                f"the prompt has {n_prompt} tokens; the judge model takes {self._max_positions}"
            )
        pieces: list[TokenLogprob] = []
        n_completion = 0
        with torch.inference_mode():
            out = self._lm(input_ids=prompt_ids, use_cache=True)
            past = out.past_key_values
            for n, key in enumerate(keys):
                segment = ("{" if n == 0 else "}, ") + f'"{key}": {{"reason": "", "verdict": '
                segment_ids = self._encode(segment)
                out = self._lm(input_ids=segment_ids, past_key_values=past, use_cache=True)
                past = out.past_key_values
                logits = out.logits[0, -1, self._digit_ids].float()
                logprobs = torch.log_softmax(logits, dim=-1).tolist()
                level = max(range(len(logprobs)), key=lambda i: logprobs[i])
                pieces.append(TokenLogprob(segment, 0.0))
                top = tuple(
                    (str(lvl), lp) for lvl, lp in zip(VERDICT_LEVELS, logprobs, strict=True)
                )
                pieces.append(TokenLogprob(str(VERDICT_LEVELS[level]), logprobs[level], top))
                chosen = torch.tensor([[self._digit_ids[level]]], device=self.config.device)
                out = self._lm(input_ids=chosen, past_key_values=past, use_cache=True)
                past = out.past_key_values
                n_completion += int(segment_ids.shape[1]) + 1
        pieces.append(TokenLogprob("}}", 0.0))
        return Completion(
            text="".join(p.token for p in pieces),
            finish_reason="stop",
            tokens=tuple(pieces),
            prompt_tokens=n_prompt,
            completion_tokens=n_completion + 1,
        )
