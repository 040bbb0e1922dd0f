"""Math reward fidelity: agreement with labelled cases, ours beside Math-Verify's defaults.

Run: ``python -m bench run math_fidelity`` (prints one JSON object and records it, with its
tables: ``bench/results/math_fidelity.json`` with ``--record``). Two parts:

- ``table``: Math-Verify's own public test cases (``tests/math/cases/math_verify.jsonl``,
  ported from huggingface/Math-Verify 0.9.0 ``tests/``), each prediction written in up to
  three forms (``boxed``, ``inline``, ``plain``; a whole worked solution is the form
  ``solution``). Per form: how often ``tribunal.math.verify_answer`` and Math-Verify's
  ``verify(parse(gold), parse(response))`` (default extraction configs, the case's
  ``float_rounding`` / ``strict`` / ``allow_set_relation_comp``) agree with the table's
  expected label. An error result (``bad_input``, ``internal_error``) counts as a
  disagreement. Both are also scored against the upstream label alone.
- ``gold_solutions``: GSM8K test (1,319) and MATH-500 (500) gold solutions against their own
  answers (data under ``$TRIBUNAL_DATA_DIR/math``, default ``../shared/data`` beside the
  repository; left out, with a note, when absent).

- ``real_outputs``: 512 real model solutions with independent labels
  (``tests/math/cases/processbench.jsonl``: ProcessBench's GSM8K and MATH-500 rows): how often
  the reward agrees with the label, wrong answers paid and right ones missed, in the shipped
  specs' strict format (``marked``) and in ``lenient``, beside Math-Verify's defaults; and
  the CPU per item (``time.process_time``) of ``verify_answer`` in ``lenient`` over these
  and the GSM8K gold solutions. ``--baseline DIR`` (a checkout's ``services`` directory,
  e.g. from ``git archive`` of the commit before issue 36) times that code's
  ``verify_answer`` on the same items in a subprocess, interleaved with this one's.
- ``reasoning_outputs``: 311 complete reasoning-model outputs with independent labels
  (``bench/reasoning_outputs.py``: Sky-T1's MATH-500, AIME 2024 and AMC 2023 outputs, a
  ``<think>`` block before each solution; data under ``$TRIBUNAL_DATA_DIR/math/sky_t1``,
  left out with a note when absent): agreement with the harness's labels in ``marked`` and
  ``lenient``, beside Math-Verify given the gold in math delimiters (``$gold$``, as its
  documentation writes it) and as a bare string (as the ProcessBench part gives it).
- ``red_team``: the seeded mutation operators of ``bench/math_mutations.py`` applied
  to every honest answer of the real set: meaning-changing mutations paid (target 0) and
  meaning-preserving ones refused (target 0), for Tribunal (``marked``) and Math-Verify.

Everything runs in this process, one case at a time, under a 10 s guard per case.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench._stack import DATA, ROOT  # DATA: $TRIBUNAL_DATA_DIR, default ../shared/data

CASES = ROOT / "tests" / "math" / "cases" / "math_verify.jsonl"
GUARD_S = 10
FORMS = ("boxed", "inline", "plain", "solution")


class CaseTimeout(BaseException):
    """A case ran past its guard (a BaseException, so that no ``except Exception`` eats it)."""


@contextmanager
def guard(seconds: int) -> Iterator[None]:
    """Raise ``CaseTimeout`` in the main thread after ``seconds``."""

    def _raise(signum: int, frame: object) -> None:
        raise CaseTimeout

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def ours(response: str, ground_truth: str, options: dict[str, Any]) -> bool | str:
    """Tribunal's verdict: True / False, or the error code."""
    from tribunal.math import MathConfig, verify_answer
    from tribunal.wire.errors import TribunalError

    try:
        with guard(GUARD_S):
            return bool(verify_answer(response, ground_truth, MathConfig(**options)).reward == 1.0)
    except TribunalError as exc:
        return str(exc.code)
    except CaseTimeout:
        return "timeout"


def math_verify(response: str, ground_truth: str, options: dict[str, Any]) -> bool | str:
    """Math-Verify's verdict with its defaults (it catches its own errors and timeouts)."""
    from math_verify import parse, verify

    try:
        with guard(GUARD_S):
            return bool(verify(parse(ground_truth), parse(response), **options))
    except CaseTimeout:
        return "timeout"


def _rate(hits: int, total: int) -> float:
    return round(hits / total, 4) if total else 0.0


def table() -> dict[str, Any]:
    """Agreement per form with the expected labels, ours and Math-Verify's."""
    cases = [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines()]
    counts = {f: {"n": 0, "ours": 0, "math_verify": 0, "ours_up": 0, "mv_up": 0} for f in FORMS}
    disagreements: list[dict[str, Any]] = []
    for case in cases:
        for form, entry in case["forms"].items():
            row = counts[form]
            verdicts = {
                "ours": ours(entry["response"], case["ground_truth"], case["options"]),
                "math_verify": math_verify(
                    entry["response"], case["ground_truth"], case["options"]
                ),
            }
            row["n"] += 1
            for name, verdict in verdicts.items():
                row[name] += verdict == entry["expected"]
            row["ours_up"] += verdicts["ours"] == case["upstream_expected"]
            row["mv_up"] += verdicts["math_verify"] == case["upstream_expected"]
            if verdicts["ours"] != entry["expected"]:
                disagreements.append({"id": case["id"], "form": form, **verdicts})
    per_form = {
        form: {
            "cases": row["n"],
            "ours": _rate(row["ours"], row["n"]),
            "math_verify": _rate(row["math_verify"], row["n"]),
            "ours_vs_upstream_label": _rate(row["ours_up"], row["n"]),
            "math_verify_vs_upstream_label": _rate(row["mv_up"], row["n"]),
        }
        for form, row in counts.items()
    }
    return {"per_form": per_form, "ours_disagreements": disagreements}


def _gold_rate(
    pairs: list[tuple[str, str]], judge: Callable[[str, str, dict[str, Any]], Any]
) -> dict[str, Any]:
    start = time.perf_counter()
    hits = sum(judge(response, truth, {}) is True for response, truth in pairs)
    return {
        "correct": hits,
        "total": len(pairs),
        "rate": _rate(hits, len(pairs)),
        "seconds": round(time.perf_counter() - start, 1),
    }


def unbox(solution: str) -> str:
    """Replace the last ``\\boxed{X}`` of ``solution`` by ``X`` (a solution without its box)."""
    start = solution.rfind("\\boxed{")
    depth = 0
    for end in range(start + len("\\boxed"), len(solution)):
        depth += {"{": 1, "}": -1}.get(solution[end], 0)
        if depth == 0:
            return solution[:start] + solution[start + len("\\boxed{") : end] + solution[end + 1 :]
    return solution


def gold_solutions() -> dict[str, Any]:
    """GSM8K and MATH-500 gold solutions against their answers, ours and Math-Verify's.

    As written (``gsm8k``, ``math500``), and without what marks the answer: GSM8K without
    its ``#### N`` line and ``<<...>>`` calculator notes, MATH-500 with its last
    ``\\boxed{X}`` replaced by ``X``, as a model that does not box its answer writes.
    """
    math_dir = DATA / "math"
    gsm8k_path, math500_path = math_dir / "gsm8k_test.jsonl", math_dir / "math500_test.jsonl"
    if not (gsm8k_path.exists() and math500_path.exists()):
        return {"skipped": f"no GSM8K / MATH-500 data under {math_dir} (set TRIBUNAL_DATA_DIR)"}
    gsm8k = [json.loads(line)["answer"] for line in gsm8k_path.read_text().splitlines()]
    math500 = [json.loads(line) for line in math500_path.read_text().splitlines()]
    gsm8k_pairs = [(a, a.rsplit("####", 1)[1].strip()) for a in gsm8k]
    sets = {
        "gsm8k": gsm8k_pairs,
        "math500": [(r["solution"], r["answer"]) for r in math500],
        "gsm8k_without_hash_line": [
            (re.sub(r"<<[^>]*>>", "", solution.rsplit("####", 1)[0]), truth)
            for solution, truth in gsm8k_pairs
        ],
        "math500_without_box": [(unbox(r["solution"]), r["answer"]) for r in math500],
    }
    return {
        name: {"ours": _gold_rate(pairs, ours), "math_verify": _gold_rate(pairs, math_verify)}
        for name, pairs in sets.items()
    }


FORM_LABELS = {
    "boxed": "`\\boxed{X}`",
    "inline": "`$X$`",
    "plain": "plain `X`",
    "solution": "worked solution as written",
}
GOLD_LABELS = {
    "gsm8k": "GSM8K test gold solutions",
    "math500": "MATH-500 gold solutions",
    "gsm8k_without_hash_line": "GSM8K without the `#### N` line and `<<…>>` notes",
    "math500_without_box": "MATH-500 with the last `\\boxed{X}` replaced by `X`",
}


def _percent(rate: float, total: int) -> str:
    """``rate`` (rounded to 4 digits in the report) of ``total`` cases as a percentage, from
    the count it stands for (151 of 154 is 98.1 %, not the 98.0 % of 0.9805)."""
    hits = round(rate * total)
    return "100 %" if hits == total else f"{100 * hits / total:.1f} %"


def tables(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' tables: agreement per form (upstream's labels alone in brackets), then the
    gold solutions."""
    per_form = result["table"]["per_form"]
    forms = results.table(
        ["form", "cases", "Tribunal", "Math-Verify"],
        [
            [
                FORM_LABELS[form],
                row["cases"],
                f"{_percent(row['ours'], n)} ({_percent(row['ours_vs_upstream_label'], n)})",
                f"{_percent(row['math_verify'], n)} "
                f"({_percent(row['math_verify_vs_upstream_label'], n)})",
            ]
            for form, row in per_form.items()
            for n in [row["cases"]]
        ],
        title="Math-Verify's test cases",
    )
    gold = result["gold_solutions"]
    extra = _issue36_tables(result)
    if "skipped" in gold:
        return [forms, *extra]
    rows = []
    for name, sides in gold.items():
        total = sides["ours"]["total"]
        label = GOLD_LABELS[name] + (f" ({total:,})" if name in ("gsm8k", "math500") else "")
        rows.append(
            [label]
            + [f"{side['correct']:,} ({_percent(side['rate'], total)})" for side in sides.values()]
        )
    return [
        forms,
        results.table(["items", "Tribunal", "Math-Verify defaults"], rows, "Gold solutions"),
        *extra,
    ]


def _issue36_tables(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The real-output and red-team tables (issue 36)."""
    real, red = result["real_outputs"], result["red_team"]
    sides = [("Tribunal, marked", real["marked"]), ("Tribunal, lenient", real["lenient"])]
    sides.append(("Math-Verify defaults", real["math_verify"]))
    agreement = results.table(
        ["reward", "agrees with the label", "wrong answers paid", "right answers missed"],
        [
            [name, f"{side['agree']} of {real['items']}", side["wrong_paid"], side["right_missed"]]
            for name, side in sides
        ],
        "Real model solutions with independent labels (ProcessBench)",
    )
    rows = []
    for kind, label in (("changing", "paid"), ("preserving", "refused")):
        for name, row in red[kind].items():
            rows.append([f"{name} ({label})", row["cases"], row["tribunal"], row["math_verify"]])
    mutations = results.table(
        ["operator", "cases", "Tribunal, marked", "Math-Verify"], rows, "Mutation red-team"
    )
    reasoning = result.get("reasoning_outputs", {"skipped": "not run"})
    if "skipped" in reasoning:
        return [agreement, mutations]
    names = {
        "marked": "Tribunal, marked",
        "lenient": "Tribunal, lenient",
        "math_verify": "Math-Verify, gold as `$gold$`",
        "math_verify_bare_gold": "Math-Verify, gold as a bare string",
    }
    thinking = results.table(
        ["reward", "agrees with the label", "wrong answers paid", "right answers missed"],
        [
            [
                name,
                f"{side['agree']} of {reasoning['items']}",
                side["wrong_paid"],
                side["right_missed"],
            ]
            for key, name in names.items()
            for side in [reasoning[key]]
        ],
        "Reasoning-model outputs with independent labels (Sky-T1, a <think> block each)",
    )
    return [agreement, mutations, thinking]


REAL = ROOT / "tests" / "math" / "cases" / "processbench.jsonl"
_TIMER = """
import json, sys, time
from tribunal.math import verify_answer
rows = json.load(sys.stdin)
start = time.process_time()
for response, truth in rows:
    try:
        verify_answer(response, truth)
    except Exception:
        pass
print((time.process_time() - start) / len(rows) * 1000)
"""


def _cpu_ms(rows: list[tuple[str, str]], services: Path) -> float:
    """CPU ms per item of ``services``' ``verify_answer`` (defaults) over ``rows``, in a
    fresh process (its own parse caches)."""
    env = {**os.environ, "PYTHONPATH": str(services)}
    done = subprocess.run(
        [sys.executable, "-c", _TIMER],
        input=json.dumps(rows),
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return round(float(done.stdout.strip().splitlines()[-1]), 4)


def real_outputs(baseline: Path | None) -> dict[str, Any]:
    """Agreement with ProcessBench's labels, and CPU per item (see the module docstring)."""
    from math_verify import parse, verify

    from tribunal.math import MathConfig, verify_answer

    rows = [json.loads(line) for line in REAL.read_text(encoding="utf-8").splitlines()]
    label = [bool(r["correct"]) for r in rows]
    report: dict[str, Any] = {"items": len(rows), "labelled_right": sum(label)}
    for name in ("marked", "lenient"):
        config = MathConfig(answer_format=name)
        paid = [verify_answer(r["response"], r["ground_truth"], config).reward == 1.0 for r in rows]
        report[name] = _agreement(paid, label)
    reference = []
    for r in rows:
        with guard(GUARD_S):
            reference.append(bool(verify(parse(r["ground_truth"]), parse(r["response"]))))
    report["math_verify"] = _agreement(reference, label)
    gsm8k_path = DATA / "math" / "gsm8k_test.jsonl"
    timed = [(r["response"], r["ground_truth"]) for r in rows]
    if gsm8k_path.exists():
        for line in gsm8k_path.read_text().splitlines():
            answer = json.loads(line)["answer"]
            timed.append((answer, answer.rsplit("####", 1)[1].strip()))
    here = ROOT / "services"
    cpu: dict[str, Any] = {"items": len(timed), "after_ms": [], "before_ms": []}
    for _ in range(3):  # interleaved: the machine's load moves both alike
        cpu["after_ms"].append(_cpu_ms(timed, here))
        if baseline is not None:
            cpu["before_ms"].append(_cpu_ms(timed, baseline))
    report["cpu_per_item"] = cpu
    return report


def _agreement(paid: list[bool], label: list[bool]) -> dict[str, int]:
    return {
        "agree": sum(p == g for p, g in zip(paid, label, strict=True)),
        "wrong_paid": sum(p and not g for p, g in zip(paid, label, strict=True)),
        "right_missed": sum(g and not p for p, g in zip(paid, label, strict=True)),
    }


def reasoning_outputs() -> dict[str, Any]:
    """Agreement with Sky-T1's harness labels (see the module docstring)."""
    from math_verify import parse, verify

    from bench import reasoning_outputs as data
    from tribunal.math import MathConfig, verify_answer

    if absent := data.missing():
        return {"skipped": f"no data under {data.data_dir()}: {absent}"}
    rows = data.rows()
    label = [r["correct"] for r in rows]
    report: dict[str, Any] = {"items": len(rows), "labelled_right": sum(label)}
    for name in ("marked", "lenient"):
        config = MathConfig(answer_format=name)
        paid = [verify_answer(r["response"], r["ground_truth"], config).reward == 1.0 for r in rows]
        report[name] = _agreement(paid, label)
    for name, gold in (("math_verify", "${}$"), ("math_verify_bare_gold", "{}")):
        paid = []
        for r in rows:
            with guard(GUARD_S):
                paid.append(
                    bool(verify(parse(gold.format(r["ground_truth"])), parse(r["response"])))
                )
        report[name] = _agreement(paid, label)
    return report


def red_team() -> dict[str, Any]:
    """Every operator of the mutation red-team over every honest answer of the real set."""
    import random

    from math_verify import parse, verify

    from bench import math_mutations as mutations
    from tribunal.math import verify_answer

    def mv(response: str, gold: str) -> bool:
        try:
            with guard(GUARD_S):
                return bool(verify(parse(gold), parse(response)))
        except (CaseTimeout, Exception):
            return False

    report: dict[str, Any] = {"honest_answers": len(mutations.HONEST)}
    for kind, operators, want in (
        ("changing", mutations.CHANGING, False),
        ("preserving", mutations.PRESERVING, True),
    ):
        rows = {}
        for name, operator in operators.items():
            rng = random.Random(f"{mutations.SEED}-{name}")
            cases = [(operator(box, rng), gold) for box, gold in mutations.HONEST]
            cases = [(r, g) for r, g in cases if r is not None]
            ours = sum(
                (verify_answer(r, g, mutations.CONFIG).reward == 1.0) != want for r, g in cases
            )
            rows[name] = {
                "cases": len(cases),
                "tribunal": ours,
                "math_verify": sum(mv(r, g) != want for r, g in cases),
            }
        report[kind] = rows
    return report


def main() -> None:
    """Print the figures as one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="A checkout's services directory: also time the real outputs with its tribunal.",
    )
    args = parser.parse_args()
    baseline = args.baseline.resolve() if args.baseline else None
    result = {
        "command": "python bench/math_fidelity.py" + (" --baseline DIR" if baseline else ""),
        "table": table(),
        "gold_solutions": gold_solutions(),
        "real_outputs": real_outputs(baseline),
        "reasoning_outputs": reasoning_outputs(),
        "red_team": red_team(),
    }
    sys.stdout.write(json.dumps(result, indent=1) + "\n")
    results.record("math_fidelity", result, tables(result))


if __name__ == "__main__":
    main()
