"""Citation scorer throughput on the 46 DR Tulu-style traces; prints one JSON object.

Also writes it, with its table, to ``bench/results/citation_throughput.json``.

    .venv/bin/python bench/citation_throughput.py [--rounds 20] [--claims-per-call 8]

- ``none`` and ``lexical``: answers/s of the verifier's whole deterministic work
  (``score_offline``: parse, evidence, gates, support, score) in this process (one core), the
  traces scored ``rounds`` times.
- ``cpu_per_claim_us``: CPU time (``time.process_time``) per judged claim of the lexical
  support decision alone, over the same claims in one run: ``before`` is the word-overlap
  rule of the lexical mode before issue 26 (copied below as :func:`overlap_judge`, for this
  comparison only), ``after`` the content checks (``tribunal.citation.lexical.judge_all``,
  evidence read once per answer in both, after one warm-up round of each: a worker's stem
  caches are warm after its first answers); ``after_group_8`` with each answer's evidence
  shared by 8 completions, as in a GRPO group.
- ``paraphrase_ratio``: the lexical reward of a faithful paraphrase over that of a verbatim
  copy, on ``tests/citation/cases/paraphrases.jsonl``.
- ``largest_answer_s``: wall time of ``score_offline`` on an answer at every default limit
  (``max_claims`` claims citing ``max_ids_per_claim`` of ``max_distinct_ids`` 3 kB snippets).
- ``latency``: a small item sent while one verifier (``--processes`` scoring processes)
  scores a request of 64 items at the old inline limit (16,384 characters each): its latency
  beside its latency alone and one large item's (target: no more than its own time plus the
  task in flight, never the batch's).
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

from bench import results  # noqa: E402
from bench.citation_data import item_at_the_size_limit, trace_items  # noqa: E402
from tribunal.citation.config import CitationConfig  # noqa: E402
from tribunal.citation.content import read_snippet  # noqa: E402
from tribunal.citation.gates import content_words  # noqa: E402
from tribunal.citation.judge import JudgeModeConfig, LLMSupport  # noqa: E402
from tribunal.citation.lexical import LexicalThresholds, judge_all  # noqa: E402
from tribunal.citation.parse import find_answer, parse_answer  # noqa: E402
from tribunal.citation.verifier import CitationVerifier, prepare, score_offline  # noqa: E402
from tribunal.llm import BackendConfig, create_backend  # noqa: E402
from tribunal.llm.testing import FakeOpenAIServer, FakeScript  # noqa: E402
from tribunal.wire.citation import CitationItem  # noqa: E402
from tribunal.wire.citation_verdicts import ClaimTask  # noqa: E402

# DR Tulu's cited-span pattern (its claims cannot contain '<'), used only to count its calls.
_DR_TULU_CITE = re.compile(r"<cite id=[\"']?[^\"'>\s]+[\"']?[^>]*>[^<]+</cite>")


PARAPHRASES = ROOT / "tests" / "citation" / "cases" / "paraphrases.jsonl"
_SUFFIXES = ("ing", "ed", "es", "s")


def answers_per_s(items: list[CitationItem], mode: str, rounds: int) -> float:
    config = CitationConfig(support=mode)  # type: ignore[arg-type]
    start = time.perf_counter()
    for _ in range(rounds):
        for item in items:
            score_offline(item, config)
    return len(items) * rounds / (time.perf_counter() - start)


def overlap_judge(tasks: list[ClaimTask], evidence: dict[str, str]) -> list[float]:
    """The lexical mode before issue 26: coverage of a claim's suffix-stripped content words
    by the union of its cited snippets (``services/citation/lexical.py`` at 495eb32)."""

    def stems(text: str) -> set[str]:
        out = set()
        for word in content_words(text):
            for suffix in _SUFFIXES:
                if len(word) > len(suffix) + 3 and word.endswith(suffix):
                    word = word[: -len(suffix)]
                    break
            out.add(word)
        return out

    read = {sid: stems(text) for sid, text in evidence.items()}
    out = []
    for task in tasks:
        claim = stems(task.text)
        union: set[str] = set().union(*(read[sid] for sid, _ in task.snippets))
        out.append(len(claim & union) / len(claim) if claim else 0.0)
    return out


def cpu_per_claim(items: list[CitationItem], rounds: int) -> dict[str, Any]:
    """CPU µs per judged claim of the support decision, before and after, in one run.

    ``after`` reads every answer's snippets afresh (the snippet cache cleared per answer);
    ``after_group_8`` judges each answer 8 times on the same evidence, as the completions of
    a GRPO group of 8 are (their snippets are read once)."""
    config = CitationConfig(support="lexical")
    answers = [prepare(item, config) for item in items]
    answers = [a for a in answers if a.tasks]
    claims = sum(len(a.tasks) for a in answers) * rounds
    timings: dict[str, Any] = {}
    # One round of each first: a worker's stem caches are warm after its first answers.
    for name, group in (("warm-up", 1), ("before", 1), ("after", 1), ("after_group_8", 8)):
        start = time.process_time()
        for _ in range(rounds):
            for answer in answers:
                if name in ("warm-up", "before"):
                    overlap_judge(answer.tasks, answer.evidence)
                if name == "before":
                    continue
                read_snippet.cache_clear()
                for _ in range(group):
                    judge_all(answer.tasks, answer.evidence, LexicalThresholds())
        timings[name] = round((time.process_time() - start) / (claims * group) * 1e6, 1)
    del timings["warm-up"]
    timings["ratio"] = round(timings["after"] / timings["before"], 2)
    timings["ratio_group_8"] = round(timings["after_group_8"] / timings["before"], 2)
    timings["claims"] = claims // rounds
    return timings


def paraphrase_ratio() -> float:
    """Lexical reward of the paraphrases over that of verbatim copies (mean over the set)."""
    config = CitationConfig(support="lexical")
    totals = {"snippet": 0.0, "paraphrase": 0.0}
    for line in PARAPHRASES.read_text().splitlines():
        row = json.loads(line)
        for kind in totals:
            item = CitationItem(
                id=kind,
                response=f"<answer><cite id=S>{row[kind]}</cite></answer>",
                evidence={"S": row["snippet"]},
            )
            totals[kind] += score_offline(item, config).reward or 0.0
    return round(totals["paraphrase"] / totals["snippet"], 3)


def largest_answer_s() -> float:
    """Wall time of the deterministic work on an answer at every default limit."""
    config = CitationConfig(support="lexical")
    snippet = (
        "Hyperprogressive disease occurred in 12 of 131 patients (9%) treated with anti-PD-1, "
        "and tumour growth rate at least doubled in them. "
    ) * 24
    evidence = {f"S{i}": f"{snippet} Study {i}." for i in range(config.max_distinct_ids)}
    claims = []
    for c in range(config.max_claims):
        ids = ",".join(
            f"S{(c * config.max_ids_per_claim + k) % config.max_distinct_ids}"
            for k in range(config.max_ids_per_claim)
        )
        claims.append(
            f"<cite id={ids}>Hyperprogression in {c} of 131 patients on anti-PD-1.</cite>"
        )
    item = CitationItem(
        id="largest", response=f"<answer>{' '.join(claims)}</answer>", evidence=evidence
    )
    start = time.perf_counter()
    score_offline(item, config)
    return round(time.perf_counter() - start, 2)


async def small_behind_large(processes: int, large: int = 64) -> dict[str, Any]:
    """Latency of a small item sent while a request of ``large`` items at the old inline size
    limit (16,384 characters) is being scored by one verifier with ``processes`` scoring
    processes; beside it, the small item's latency alone (its scoring and one pool hand-off)
    and one large item's (what it may wait for: the task in flight). Medians of 3 (of 5 for one
    large item)."""
    verifier = CitationVerifier(CitationConfig(support="lexical"), processes=processes)
    await verifier.start()
    small = CitationItem(
        id="small",
        response="<answer><cite id=S1>The Golden Gate Bridge opened in 1937.</cite></answer>",
        evidence={"S1": "The Golden Gate Bridge opened in 1937 and spans 1,280 m."},
    )

    async def timed(items: list[CitationItem]) -> float:
        start = time.perf_counter()
        await verifier.score(items)
        return (time.perf_counter() - start) * 1e3

    try:
        alone = sorted([await timed([small]) for _ in range(3)])[1]
        one_large = sorted([await timed([item_at_the_size_limit(f"one{i}")]) for i in range(5)])[2]
        behind, batch = [], []
        for round_ in range(3):
            items = [item_at_the_size_limit(f"r{round_}-{i}") for i in range(large)]
            request = asyncio.create_task(timed(items))
            await asyncio.sleep(0.05)  # the large request is claimed and queued first
            behind.append(await timed([small]))
            batch.append(await request)
    finally:
        await verifier.aclose()
    return {
        "processes": processes,
        "large_items": large,
        "small_alone_ms": round(alone, 1),
        "one_large_ms": round(one_large, 1),
        "small_behind_large_ms": round(sorted(behind)[1], 1),
        "large_request_ms": round(sorted(batch)[1], 1),
    }


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
        support = LLMSupport(backend, JudgeModeConfig(claims_per_call=claims_per_call))
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


def tables(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' table: answers/s and model calls per answer and per judged claim, by mode,
    beside DR Tulu's scorer on the same answers."""
    judge = result["judge"]
    return [
        results.table(
            ["mode", "answers/s", "model calls per answer", "per judged claim"],
            [
                ["`none` (format and ids)", f"{result['none_answers_per_s']:,.0f}", 0, 0],
                ["`lexical`", f"{result['lexical_answers_per_s']:,.0f}", 0, 0],
                [
                    "`judge`",
                    "(bounded by the model)",
                    f"{judge['calls_per_answer']:.1f} ({judge['calls']} for "
                    f"{judge['answers']} answers, {judge['judged_claims']} claims)",
                    f"{judge['calls_per_judged_claim']:.3f}",
                ],
                [
                    "DR Tulu's scorer on the same answers",
                    "",
                    f"{judge['dr_tulu_calls_per_answer']:.1f} ({judge['dr_tulu_calls']})",
                    f"{judge['dr_tulu_calls_per_claim']:.2f} (2 per cited claim, 1 per "
                    "uncited segment)",
                ],
            ],
        )
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--claims-per-call", type=int, default=8)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    items = [CitationItem(**item) for item in trace_items()]
    result = {
        "traces": len(items),
        "none_answers_per_s": round(answers_per_s(items, "none", args.rounds), 1),
        "lexical_answers_per_s": round(answers_per_s(items, "lexical", args.rounds), 1),
        "cpu_per_claim_us": cpu_per_claim(items, args.rounds),
        "paraphrase_ratio": paraphrase_ratio(),
        "largest_answer_s": largest_answer_s(),
        "judge": await judge_calls(items, args.claims_per_call),
        "latency": await small_behind_large(args.processes),
        "claims_per_call": args.claims_per_call,
    }
    print(json.dumps(result))
    results.record("citation_throughput", result, tables(result))


if __name__ == "__main__":
    asyncio.run(main())
