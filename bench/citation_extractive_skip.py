"""Judge calls the extractive gate saves on AttributionBench; prints one JSON object.

    .venv/bin/python bench/citation_extractive_skip.py [--labels LABELS.jsonl] [--limit N]

Every labelled claim (``tribunal calibrate citation``'s held-in set by default) is scored as
a one-claim answer in the ``judge`` support mode, twice, each time with a cold judge cache:

- ``before``: every claim that passed the gates is asked of the judge (the extractive
  gate turned off for this measurement only, by replacing ``verifier._verified``);
- ``after``: a claim that every cited passage states whole (``verifier._verified``) is
  decided extractively; with a question only its topic is asked.

The judge is the stand-in OpenAI-compatible server (``tribunal.llm.testing.FakeOpenAIServer``:
no GPU or model here) answering "supported" / "relevant" / "on topic" (level 2) to every key,
so that ``verdicts_changed`` (claims whose support, relevance or reward differ between the
two runs) measures the plumbing: a real judge that found a verbatim claim unsupported would
differ, and ``extractive_human_labels`` (the human labels of the claims decided
extractively) says how often humans agree with "supported" there. The runs are in process
(``prepare`` / ``finish`` without the scoring pool: the pool's processes import the module
afresh, where the replacement would not reach). Counted: model calls, verdict keys asked,
prompt characters; with the items' questions and without them (then no topic is asked and
an extractive claim needs no call at all).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tribunal.citation import verifier as verifier_module  # noqa: E402
from tribunal.citation.calibrate import LabelledClaim, read_labels  # noqa: E402
from tribunal.citation.config import CitationConfig  # noqa: E402
from tribunal.citation.judge import JudgeModeConfig, LLMSupport  # noqa: E402
from tribunal.citation.support import SupportOutcome  # noqa: E402
from tribunal.llm import BackendConfig, create_backend  # noqa: E402
from tribunal.llm.testing import FakeOpenAIServer, FakeScript  # noqa: E402
from tribunal.llm.testing.fake_openai import FakeStats  # noqa: E402

DEFAULT_LABELS = ROOT / "tests" / "citation" / "cases" / "attributionbench.jsonl"


async def run(
    fake: FakeOpenAIServer, labelled: list[LabelledClaim], with_question: bool, skip: bool
) -> dict[str, Any]:
    """Score every claim in judge mode; return per-claim results and what the judge saw."""
    fake.stats = FakeStats()
    backend = create_backend(
        BackendConfig(kind="openai", model="stand-in", base_url=fake.base_url, logprobs=False),
        "TRIBUNAL_CITATION_",
    )
    support = LLMSupport(backend, JudgeModeConfig())
    config = CitationConfig(support="judge")
    original = verifier_module._verified
    if not skip:
        verifier_module._verified = lambda *args: False  # type: ignore[assignment]
    await support.start()
    claims: list[dict[str, Any]] = []
    try:
        for i, labelled_claim in enumerate(labelled):
            item = labelled_claim.item(str(i), "judge")
            if not with_question:
                item = item.model_copy(update={"question": None})
            prepared = verifier_module.prepare(item, config)
            outcome = SupportOutcome()
            if prepared.judged and prepared.tasks:
                outcome = await support.judge(
                    item.question or "", prepared.tasks, prepared.evidence, prepared.topic_only
                )
            result = verifier_module.finish(prepared, outcome, "stand-in", "x")
            assert result.details is not None
            [claim] = result.details["claims"]
            claims.append({**claim, "reward": result.reward})
    finally:
        verifier_module._verified = original
        await support.aclose()
    requests = fake.stats.requests
    return {
        "claims": claims,
        "calls": len(requests),
        "keys": sum(
            len(r["response_format"]["json_schema"]["schema"]["properties"]) for r in requests
        ),
        "prompt_chars": sum(len(m["content"]) for r in requests for m in r["messages"]),
    }


def compare(
    labelled: list[LabelledClaim], before: dict[str, Any], after: dict[str, Any]
) -> dict[str, Any]:
    """The savings and the changes between the two runs."""
    decided = [i for i, c in enumerate(after["claims"]) if c["decided_by"] == "extractive"]
    fields = ("support", "relevance", "gate", "reward")
    changed = [
        i
        for i, (b, a) in enumerate(zip(before["claims"], after["claims"], strict=True))
        if any(b[f] != a[f] for f in fields)
    ]
    labels: dict[str, int] = {}
    for i in decided:
        labels[labelled[i].label] = labels.get(labelled[i].label, 0) + 1
    return {
        "claims": len(labelled),
        "decided_extractively": len(decided),
        "extractive_human_labels": labels,
        "calls": {"before": before["calls"], "after": after["calls"]},
        "verdict_keys": {"before": before["keys"], "after": after["keys"]},
        "prompt_chars": {"before": before["prompt_chars"], "after": after["prompt_chars"]},
        "verdicts_changed": len(changed),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    parser.add_argument("--limit", type=int, default=None, help="The first N claims only.")
    args = parser.parse_args()
    labelled = read_labels(args.labels)[: args.limit]
    fake = FakeOpenAIServer(FakeScript(default_level=2))
    fake.start()
    out: dict[str, Any] = {"labels": str(args.labels), "judge": "FakeOpenAIServer, level 2"}
    try:
        for name, with_question in (("with_question", True), ("without_question", False)):
            before = await run(fake, labelled, with_question, skip=False)
            after = await run(fake, labelled, with_question, skip=True)
            out[name] = compare(labelled, before, after)
    finally:
        fake.stop()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
