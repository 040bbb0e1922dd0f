"""The judge support mode on CPU with the transformers backend and a tiny random Qwen3.

A random model's verdicts mean nothing; what is tested is the path: the citation prompt
through a chat template, verdicts restricted to the tokens 0 / 1 / 2, one judgment per claim.
Nothing is downloaded: the model is built from a config and the tokenizer trained here.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tribunal.citation.config import CitationConfig
from tribunal.citation.judge import SYSTEM_PROMPT, JudgeModeConfig, LLMSupport
from tribunal.citation.verifier import CitationVerifier
from tribunal.llm import BackendConfig, create_backend
from tribunal.testing.tiny_model import TinyModelConfig, build_tiny_model
from tribunal.wire.citation import CitationItem

# Looked up, not imported: torch and transformers take seconds to import, which every
# collection of the suite paid here; the tests import them when they build the model.
pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("torch", "transformers", "tokenizers")),
    reason="needs torch, transformers and tokenizers (the all extra)",
)


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Save a tiny random Qwen3 and a byte-level tokenizer trained on the spot."""
    sizes = TinyModelConfig(
        hidden_size=32,
        intermediate_size=64,
        head_dim=8,
        vocab_size=500,
        max_position_embeddings=8192,
    )
    corpus = [SYSTEM_PROMPT, '{"c0": {"reason": "", "verdict": 2}}'] * 20
    return build_tiny_model(sizes, corpus, tmp_path_factory.mktemp("tiny-qwen3-citation"), seed=0)


async def test_judge_mode_on_cpu(tiny_qwen3: Path) -> None:
    backend = create_backend(BackendConfig(kind="transformers", model=str(tiny_qwen3)))
    verifier = CitationVerifier(
        CitationConfig(support="judge"), LLMSupport(backend, JudgeModeConfig(claims_per_call=4))
    )
    item = CitationItem(
        id="t",
        question="How tall is it?",
        response="<answer><cite id=S1,S2>It is 330 m tall.</cite> It was built in 1889.</answer>",
        evidence={"S1": "The tower is 330 metres tall.", "S2": "Bananas are yellow."},
    )
    await verifier.start()
    try:
        [outcome] = await verifier.score([item])
    finally:
        await verifier.aclose()
    assert outcome.error is None, outcome.error
    assert outcome.reward is not None and 0.0 <= outcome.reward <= 1.0
    cited, uncited = outcome.details["claims"]
    assert cited["support"] in {"supported", "partial", "unsupported"}
    assert set(cited["relevance"]) == {"S1", "S2"} and uncited["needs_citation"] in {True, False}
    assert outcome.details["usage"]["calls"] == 1


def test_citation_import_loads_neither_torch_nor_aiohttp() -> None:
    code = (
        "import sys, tribunal.citation.api;"
        "assert 'torch' not in sys.modules and 'aiohttp' not in sys.modules, "
        "[m for m in ('torch', 'aiohttp') if m in sys.modules]"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
