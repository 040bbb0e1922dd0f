"""The ``nli`` support mode with a tiny cross-encoder made from a config (plumbing only: its
weights are random, so its verdicts say nothing about support; no hub download).

The model is a 2-layer BERT for sequence classification with the labels of an NLI model
(entailment, neutral, contradiction) and a WordPiece vocabulary written on the spot, saved
with ``save_pretrained`` and loaded from that local directory as any user's model would be.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.citation.started import score_started
from tribunal.citation.config import CitationConfig
from tribunal.citation.nli import NLISupport
from tribunal.citation.verifier import CitationVerifier
from tribunal.cli import app
from tribunal.wire.citation import CitationItem
from tribunal.wire.errors import ConfigurationError

EVIDENCE = {
    "S1": "The Eiffel Tower is 330 metres tall and stands in Paris.",
    "S2": "Bananas are rich in potassium.",
}
HELD_IN = Path(__file__).parent / "cases" / "attributionbench.jsonl"


@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-nli")
    words = sorted(
        {w.lower() for text in EVIDENCE.values() for w in text.replace(".", " ").split()}
    )
    (path / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *words]) + "\n"
    )
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(path / "vocab.txt"))
    config = transformers.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=3,
        id2label={0: "contradiction", 1: "entailment", 2: "neutral"},
        label2id={"contradiction": 0, "entailment": 1, "neutral": 2},
    )
    transformers.BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


async def test_nli_mode_judges_every_cited_claim_per_snippet(tiny_nli: Path) -> None:
    verifier = CitationVerifier(
        CitationConfig(support="nli"), nli=NLISupport(str(tiny_nli), max_length=64)
    )
    item = CitationItem(
        id="n",
        question="How tall is it?",
        response="<answer><cite id=S1,S2>It is 330 metres tall.</cite> It was built in 1889."
        "</answer>",
        evidence=EVIDENCE,
    )
    [outcome] = await score_started(verifier, [item])
    assert outcome.error is None, outcome.error
    assert outcome.reward is not None and 0.0 <= outcome.reward <= 1.0
    cited, uncited = outcome.details["claims"]
    assert outcome.details["support_mode"] == "nli"
    assert cited["support"] in {"supported", "partial", "unsupported"}
    assert set(cited["relevance"]) == {"S1", "S2"} and uncited["needs_citation"] is True
    assert outcome.details["judge_model"] == str(tiny_nli)


async def test_nli_mode_without_a_model_is_an_error_not_a_zero() -> None:
    item = CitationItem(
        id="n",
        response="<answer><cite id=S1>It is 330 metres tall.</cite></answer>",
        evidence=EVIDENCE,
        options={"support": "nli"},
    )
    [outcome] = await score_started(CitationVerifier(CitationConfig()), [item])
    assert outcome.reward is None and outcome.error is not None
    assert outcome.error.code == "backend_unavailable"


async def test_a_model_without_an_entailment_label_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        await NLISupport(str(tmp_path / "nowhere")).start()


def test_calibrate_runs_through_the_nli_mode(
    tiny_nli: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(HELD_IN.read_text().splitlines(keepends=True)[:40]))
    monkeypatch.setenv("TRIBUNAL_CITATION_NLI_MODEL", str(tiny_nli))
    result = CliRunner().invoke(
        app, ["calibrate", "citation", str(labels), "--support", "nli", "--json"]
    )
    assert result.exit_code == 0, result.output
    # The output may hold transformers' progress bars (standard error, \r) before the figures.
    figures = json.loads(result.output[result.output.rindex('{"support"') :].splitlines()[0])
    assert figures["support"] == "nli" and figures["claims"] == 40
