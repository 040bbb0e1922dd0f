"""The ``nli`` support mode: a natural-language-inference cross-encoder, no judge server.

For users without an LLM server: a sequence-classification model (``transformers``'
``AutoModelForSequenceClassification``, loaded from a local directory only, never from a
hub) reads each (cited snippet, claim) pair and gives the probability that the snippet
entails the claim (the label its config names ``entailment``). Per cited claim:

- ``supported`` when some cited snippet entails it with probability ≥ ``supported``
  (default 0.5), ``partial`` when ≥ ``partial`` (0.25), else ``unsupported``: each claim
  is judged against each snippet alone, so a claim made of two snippets is at most partial;
- a snippet is ``relevant`` when its probability is ≥ ``partial``;
- an uncited sentence needs a citation when it asserts anything (a content word or a
  figure), as in lexical mode.

The model runs in a thread, one answer at a time, off the event loop; torch and transformers
are imported only when the mode starts.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tribunal.citation.content import content_stems, numbers
from tribunal.citation.support import SupportOutcome
from tribunal.wire.citation_verdicts import ClaimJudgment, ClaimTask, Relevance, SupportVerdict
from tribunal.wire.errors import ConfigurationError

PROMPT_VERSION = "nli-1"
"""Version of how claims and snippets are given to the model (in ``config_hash``)."""


class NLISupport:
    """Judge claims with a local NLI cross-encoder.

    Args:
        model_path: Directory of the model and its tokenizer (``save_pretrained``).
        supported: Entailment probability for ``supported``.
        partial: Entailment probability for ``partial`` (and a relevant snippet).
        max_length: Tokens of one (snippet, claim) pair, at most the model's positions; the
            longer of the two is cut first (the snippet, as a rule).
        batch_size: Pairs per forward pass.

    Raises:
        ConfigurationError: (at :meth:`start`) no such directory, or a model whose labels
            name no ``entailment``.
    """

    def __init__(
        self,
        model_path: str,
        *,
        supported: float = 0.5,
        partial: float = 0.25,
        max_length: int = 512,
        batch_size: int = 16,
    ) -> None:
        self.model_path = model_path
        self.supported = supported
        self.partial = partial
        self.max_length = max_length
        self.batch_size = batch_size
        self._model: Any = None
        self._tokenizer: Any = None
        self._entailment = 0
        self._lock = threading.Lock()

    def hash_payload(self) -> dict[str, Any]:
        """What moves its verdicts, for ``config_hash``."""
        return {
            "model": str(Path(self.model_path).resolve()),
            "thresholds": [self.supported, self.partial],
            "max_length": self.max_length,
            "prompt_version": PROMPT_VERSION,
        }

    async def start(self) -> None:
        """Load the model and tokenizer (in a thread: torch's import takes seconds)."""
        await asyncio.to_thread(self._load)

    def _load(self) -> None:
        if not Path(self.model_path).is_dir():
            raise ConfigurationError(
                f"TRIBUNAL_CITATION_NLI_MODEL: {self.model_path} is not a model directory"
            )
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        torch.set_num_threads(1)
        model = AutoModelForSequenceClassification.from_pretrained(
            self.model_path, local_files_only=True
        )
        labels = {str(name).lower(): int(i) for name, i in model.config.label2id.items()}
        found = [i for name, i in labels.items() if name.startswith("entail")]
        if not found:
            raise ConfigurationError(
                f"TRIBUNAL_CITATION_NLI_MODEL: {self.model_path} names no entailment label "
                f"(labels: {sorted(labels)})"
            )
        self._entailment = found[0]
        positions = getattr(model.config, "max_position_embeddings", None)
        if positions:  # a pair longer than the model's positions cannot be read
            self.max_length = min(self.max_length, int(positions))
        self._tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=True)
        self._model = model.eval()

    async def aclose(self) -> None:
        """Drop the model."""
        self._model = self._tokenizer = None

    async def judge(
        self, question: str, tasks: Sequence[ClaimTask], evidence: Mapping[str, str]
    ) -> SupportOutcome:
        """One judgment per task, in order (the ``ClaimJudge`` protocol).

        Raises:
            ConfigurationError: Called before :meth:`start`.
        """
        if self._model is None:
            raise ConfigurationError("NLISupport.start() was not called")
        judgments = await asyncio.to_thread(self._judge_all, tasks)
        return SupportOutcome(judgments)

    def _judge_all(self, tasks: Sequence[ClaimTask]) -> list[ClaimJudgment]:
        pairs = [(text, task.text) for task in tasks for _, text in task.snippets]
        with self._lock:
            scores = iter(self._entailment_probabilities(pairs))
        out = []
        for task in tasks:
            if not task.is_cited:
                needs = bool(content_stems(task.text)) or bool(numbers(task.text))
                out.append(ClaimJudgment(needs_citation=needs))
                continue
            probabilities = {sid: next(scores) for sid, _ in task.snippets}
            best = max(probabilities.values())
            support = (
                SupportVerdict.SUPPORTED
                if best >= self.supported
                else SupportVerdict.PARTIAL
                if best >= self.partial
                else SupportVerdict.UNSUPPORTED
            )
            relevance = {
                sid: Relevance.RELEVANT if p >= self.partial else Relevance.IRRELEVANT
                for sid, p in probabilities.items()
            }
            out.append(ClaimJudgment(support=support, relevance=relevance))
        return out

    def _entailment_probabilities(self, pairs: list[tuple[str, str]]) -> list[float]:
        import torch

        out: list[float] = []
        for start in range(0, len(pairs), self.batch_size):
            batch = pairs[start : start + self.batch_size]
            encoded = self._tokenizer(
                [premise for premise, _ in batch],
                [hypothesis for _, hypothesis in batch],
                truncation="longest_first",
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            )
            with torch.no_grad():
                logits = self._model(**encoded).logits
            out += logits.softmax(-1)[:, self._entailment].tolist()
        return out
