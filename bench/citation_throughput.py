"""Citation scorer throughput on the 46 DR Tulu-style traces; prints one JSON object.

    .venv/bin/python bench/citation_throughput.py [--rounds 20] [--claims-per-call 8]

- ``none`` and ``lexical``: answers/s of ``CitationVerifier`` in-process (one core), the
  traces scored ``rounds`` times in batches of 64 (as a worker pulls them).
- ``judge``: model calls per answer and per judged claim against the stand-in
  OpenAI-compatible server (``tribunal.llm.testing.FakeOpenAIServer``, mixed verdicts by a
  hash of each criterion), cache cold; beside it, what DR Tulu's scorer would call on the
  same answers: 2 calls per cited claim (recall and precision) and 1 per uncited text
  segment (rlresearch/dr-tulu@6188f34, ``utils/citation_utils.py``; its segments are the
  text between citation tags, each one claim).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.citation_data import trace_items  # noqa: E402
from tribunal.citation.config import CitationConfig  # noqa: E402
from tribunal.citation.judge import JudgeSettings, LLMSupport  # noqa: E402
from tribunal.citation.parse import find_answer, parse_answer  # noqa: E402
from tribunal.citation.schemas import CitationItem  # noqa: E402
from tribunal.citation.verifier import CitationVerifier  # noqa: E402
from tribunal.llm import BackendConfig, create_backend  # noqa: E402
from tribunal.llm.testing import FakeOpenAIServer, FakeScript  # noqa: E402

BATCH = 64
# DR Tulu's cited-span pattern (its claims cannot contain '<'), used only to count its calls.
_DR_TULU_CITE = re.compile(r"<cite id=[\"']?[^\"'>\s]+[\"']?[^>]*>[^<]+</cite>")


async def answers_per_s(items: list[CitationItem], mode: str, rounds: int) -> float:
    verifier = CitationVerifier(CitationConfig(support=mode))  # type: ignore[arg-type]
    work = items * rounds
    start = time.perf_counter()
    for i in range(0, len(work), BATCH):
        await verifier.score(work[i : i + BATCH])
    return len(work) / (time.perf_counter() - start)


def dr_tulu_claims(response: str) -> tuple[int, int]:
    """(cited claims, uncited segments) as DR Tulu's scorer splits the answer."""
    answer = find_answer(response)[0] or ""
    cited = len(_DR_TULU_CITE.findall(answer))
    uncited = sum(1 for part in _DR_TULU_CITE.split(answer) if part.strip())
    return cited, uncited


async def judge_calls(items: list[CitationItem], claims_per_call: int) -> dict[str, Any]:
    server = FakeOpenAIServer(FakeScript(hash_levels=True), record_bodies=False)
    url = server.start()
    try:
        backend = create_backend(
            BackendConfig(kind="openai", model="stand-in", base_url=url, logprobs=False),
            "TRIBUNAL_CITATION_",
        )
        support = LLMSupport(backend, JudgeSettings(claims_per_call=claims_per_call))
        verifier = CitationVerifier(CitationConfig(support="judge", preset="dr_tulu"), support)
        await verifier.start()
        try:
            outcomes = await verifier.score(items)
        finally:
            await verifier.aclose()
    finally:
        server.stop()
    errors = [o.error.code for o in outcomes if o.error is not None]
    calls = sum(o.details["usage"]["calls"] for o in outcomes)
    judged = sum(
        1 for o in outcomes for c in o.details["claims"] if c["gate"] is None
    )  # claims sent to the model (gated ones cost nothing)
    claims = sum(len(parse_answer(i.response).claims) for i in items)
    split = [dr_tulu_claims(i.response) for i in items]
    dr_tulu = sum(2 * cited + uncited for cited, uncited in split)
    dr_tulu_claim_count = sum(cited + uncited for cited, uncited in split)
    return {
        "answers": len(items),
        "claims": claims,
        "judged_claims": judged,
        "calls": calls,
        "calls_per_answer": round(calls / len(items), 2),
        "calls_per_judged_claim": round(calls / judged, 3) if judged else None,
        "dr_tulu_calls": dr_tulu,
        "dr_tulu_calls_per_answer": round(dr_tulu / len(items), 2),
        "dr_tulu_calls_per_claim": round(dr_tulu / dr_tulu_claim_count, 3),
        "errors": errors,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--claims-per-call", type=int, default=8)
    args = parser.parse_args()
    items = [CitationItem(**item) for item in trace_items()]
    result = {
        "traces": len(items),
        "none_answers_per_s": round(await answers_per_s(items, "none", args.rounds), 1),
        "lexical_answers_per_s": round(await answers_per_s(items, "lexical", args.rounds), 1),
        "judge": await judge_calls(items, args.claims_per_call),
        "claims_per_call": args.claims_per_call,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
