"""In-process LLM backend on a Hugging Face ``transformers`` causal LM (CPU use, tests, laptops).

Constrained decoding by construction: the backend writes the answer JSON itself, following
the request's schema, and lets the model choose only the verdicts. For each key of the
schema (its top-level properties, in order) it feeds ``{"K": {"reason": "", "verdict": ``
(the entry's string properties empty, up to its one ``enum`` property) after the
chat-templated prompt, restricts the next-token distribution to the request's
``verdict_tokens`` (log-softmax over those logits), takes the most likely one and feeds it,
reusing the KV cache across keys. The returned :class:`Completion` carries those restricted
log-probabilities on the verdict tokens, so a caller computes the same expected score as
for a vLLM answer. Even a random model gives a valid verdict. No reason is generated (free
text from a small CPU model costs seconds and says little).

torch and transformers are imported in :meth:`TransformersBackend.start` only: importing
this module (or the judge service) does not load torch. Weights are loaded with
``local_files_only=True``: nothing is downloaded.

Known issues: calls run one at a time (one model, CPU-bound, in a worker thread);
``temperature`` is ignored (the choice is always the argmax level).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

from tribunal.llm.base import Completion, CompletionRequest, TokenLogprob
from tribunal.llm.config import BackendConfig
from tribunal.wire.errors import BadInput, ConfigurationError


class TransformersBackend:
    """A local causal LM as the backend.

    Args:
        config: ``model`` is a local directory (or a cached hub id); ``device`` a torch device.
    """

    kind = "transformers"

    def __init__(self, config: BackendConfig) -> None:
        self.config = config
        self.model = config.model
        self._lm: Any = None
        self._tokenizer: Any = None
        self._token_ids: dict[str, int] = {}
        self._max_positions: int | None = None
        self._cache_arg = "cache"
        self._lock = threading.Lock()

    @property
    def control_tokens(self) -> tuple[str, ...]:
        """The configured ones, and once started the tokenizer's special and added tokens
        (plain words among the added tokens structure no template and are left out)."""
        if self._tokenizer is None:
            return self.config.control_tokens
        found = set(self._tokenizer.all_special_tokens)
        found |= {t for t in self._tokenizer.get_added_vocab() if not t.strip().isalnum()}
        return tuple(sorted({*self.config.control_tokens, *found}))

    async def start(self) -> None:
        """Load tokenizer and weights (in a thread; this can take seconds).

        Raises:
            ConfigurationError: torch / transformers missing or the model cannot be loaded.
        """
        if self._lm is None:
            await asyncio.to_thread(self._load)

    def _load(self) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise ConfigurationError(
                "the transformers LLM backend needs torch and transformers "
                "(pip install 'tribunal-rl[judge-local]')"
            ) from exc
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.model, local_files_only=True)
            lm: Any = AutoModelForCausalLM.from_pretrained(
                self.model, local_files_only=True, dtype=torch.float32
            )
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot load model {self.model!r}: {exc}") from exc
        self._tokenizer = tokenizer
        self._lm = lm.to(self.config.device).eval()
        self._max_positions = getattr(lm.config, "max_position_embeddings", None)
        # transformers 5.24 renamed forward's `past_key_values` to `cache` (the old name warns
        # until its removal in 5.40); earlier releases know only the old name.
        parameters = inspect.signature(lm.forward).parameters
        self._cache_arg = "cache" if "cache" in parameters else "past_key_values"

    async def aclose(self) -> None:
        """Drop the model."""
        self._lm = None
        self._tokenizer = None

    async def complete(self, request: CompletionRequest) -> Completion:
        """Answer one call (in a worker thread; one call at a time).

        Raises:
            BadInput: The prompt is longer than the model's context.
            ConfigurationError: A verdict token is not one token of this tokenizer, or the
                schema has no verdict keys.
        """
        if self._lm is None:
            await self.start()
        return await asyncio.to_thread(self._complete_locked, request)

    def _complete_locked(self, request: CompletionRequest) -> Completion:
        with self._lock:
            return self._complete(request)

    def _verdict_ids(self, verdict_tokens: tuple[str, ...]) -> list[int]:
        ids = []
        for token in verdict_tokens:
            if token not in self._token_ids:
                encoded = self._tokenizer.encode(token, add_special_tokens=False)
                if len(encoded) != 1:
                    raise ConfigurationError(
                        f"verdict {token!r} is not one token for {self.model!r}"
                    )
                self._token_ids[token] = int(encoded[0])
            ids.append(self._token_ids[token])
        return ids

    def _encode(self, text: str) -> Any:
        return self._tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids.to(
            self.config.device
        )

    def _complete(self, request: CompletionRequest) -> Completion:
        import torch

        prompt = self._tokenizer.apply_chat_template(
            [dict(m) for m in request.messages],
            tokenize=False,
            add_generation_prompt=True,
            **dict(self.config.chat_template_kwargs),
        )
        prompt_ids = self._encode(prompt)
        n_prompt = int(prompt_ids.shape[1])
        heads = _entry_heads(request.schema)
        verdicts = request.verdict_tokens
        if not heads or not verdicts:
            raise ConfigurationError("the transformers backend needs verdict keys and tokens")
        verdict_ids = self._verdict_ids(verdicts)
        if self._max_positions and n_prompt + 16 * len(heads) > self._max_positions:
            raise BadInput(
                f"the prompt has {n_prompt} tokens; the model takes {self._max_positions}"
            )
        pieces: list[TokenLogprob] = []
        n_completion = 0
        from transformers import DynamicCache

        # One cache, filled in place by every forward call of this completion.
        cache = {self._cache_arg: DynamicCache(), "use_cache": True}
        with torch.inference_mode():
            self._lm(input_ids=prompt_ids, **cache)
            for n, head in enumerate(heads):
                segment = ("{" if n == 0 else "}, ") + head
                segment_ids = self._encode(segment)
                out = self._lm(input_ids=segment_ids, **cache)
                logits = out.logits[0, -1, verdict_ids].float()
                logprobs = torch.log_softmax(logits, dim=-1).tolist()
                level = max(range(len(logprobs)), key=lambda i: logprobs[i])
                pieces.append(TokenLogprob(segment, 0.0))
                top = tuple(zip(verdicts, logprobs, strict=True))
                pieces.append(TokenLogprob(verdicts[level], logprobs[level], top))
                chosen = torch.tensor([[verdict_ids[level]]], device=self.config.device)
                self._lm(input_ids=chosen, **cache)
                n_completion += int(segment_ids.shape[1]) + 1
        pieces.append(TokenLogprob("}}", 0.0))
        return Completion(
            text="".join(p.token for p in pieces),
            finish_reason="stop",
            tokens=tuple(pieces),
            prompt_tokens=n_prompt,
            completion_tokens=n_completion + 1,
        )


def _entry_heads(schema: Any) -> list[str]:
    """The text before each verdict: ``"K": {"reason": "", "verdict": `` per schema key.

    Each top-level property of ``schema`` is one entry; its string properties before the
    (first) ``enum`` property are written empty, the ``enum`` property's value is the verdict.
    """
    heads = []
    for key, entry in (schema.get("properties") or {}).items():
        fields = []
        for name, prop in (entry.get("properties") or {}).items():
            if "enum" in prop:
                fields.append(f'"{name}": ')
                break
            fields.append(f'"{name}": "", ')
        heads.append(f'"{key}": {{' + "".join(fields))
    return heads
