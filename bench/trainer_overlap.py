"""Where a training step's time goes: generation, waiting for rewards, training.

A tiny random Qwen3 (CPU, DeepSpeed ZeRO-3 in one process) and a reward service stand-in on
real HTTP whose every job takes a fixed latency (Tribunal's jobs API); the same workload with
``async_steps`` 0 and 1, and through TRL's ``GRPOTrainer`` with an async reward function that
calls the same service through ``tribunal.client``. Each run is a subprocess of its own; the
first step of each is a warm-up and not counted. Prints one JSON object.

    python bench/trainer_overlap.py [--steps 6] [--latency-s 0.3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results

ROOT = Path(__file__).resolve().parents[1]

GSM8K = ROOT.parent / "shared" / "data" / "math" / "gsm8k_test.jsonl"
WORKLOAD = {
    "prompts_per_step": 8,
    "group_size": 8,
    "max_response_tokens": 32,
    "max_prompt_tokens": 256,
    "max_prompts": 32,
    "learning_rate": 1e-3,
}
KEYS = ("time/step_s", "time/generation_s", "time/reward_wait_s", "time/train_s")


def ours(model_dir: str, url: str, steps: int, async_steps: int, out: str) -> dict[str, Any]:
    """Our trainer; returns mean seconds per step (first step left out)."""
    from tribunal.trainer.config import GRPOConfig
    from tribunal.trainer.loop import Trainer

    raw = {
        "model": model_dir,
        "dataset": str(GSM8K),
        "max_steps": steps,
        "async_steps": async_steps,
        "reward_sources": [{"name": "stand_in", "url": url, "verifier": "stand_in"}],
        **WORKLOAD,
    }
    history = Trainer(GRPOConfig.from_dict(raw), out).run()[1:]
    means = {k.removeprefix("time/"): statistics.mean(m[k] for m in history) for k in KEYS}
    means["reward_wait_share"] = means["reward_wait_s"] / means["step_s"]
    return {k: round(v, 4) for k, v in means.items()}


def trl(model_dir: str, url: str, steps: int, out: str) -> dict[str, Any]:
    """TRL's GRPOTrainer on the same workload; mean seconds per step (first step left out)."""
    import datasets
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from tribunal.client import TribunalClient

    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()[: WORKLOAD["max_prompts"]]]
    data = datasets.Dataset.from_list(
        [{"prompt": [{"role": "user", "content": r["question"]}]} for r in rows]
    )
    group = WORKLOAD["group_size"]

    async def stand_in_reward(completions: list[Any], **kwargs: Any) -> list[float | None]:
        texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
        async with TribunalClient(url, max_retries=2) as client:
            import asyncio

            async def one(start: int) -> list[float | None]:
                items = [
                    {"id": f"{start}-{i}", "response": t}
                    for i, t in enumerate(texts[start : start + group])
                ]
                job = await client.submit("stand_in", items)
                return [r.reward for r in await client.wait(job, timeout_s=60)]

            parts = await asyncio.gather(*(one(s) for s in range(0, len(texts), group)))
        return [r for part in parts for r in part]

    class Clock(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.times: list[float] = []
            self.start = 0.0

        def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            self.times.append(time.perf_counter() - self.start)

    clock = Clock()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    config = GRPOConfig(
        output_dir=out,
        per_device_train_batch_size=WORKLOAD["prompts_per_step"] * group,
        num_generations=group,
        max_completion_length=WORKLOAD["max_response_tokens"],
        max_steps=steps,
        learning_rate=WORKLOAD["learning_rate"],
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        beta=0.0,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=42,
    )
    trainer = GRPOTrainer(
        model=model_dir,
        reward_funcs=[stand_in_reward],
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        callbacks=[clock],
    )
    trainer.train()
    return {"step_s": round(statistics.mean(clock.times[1:]), 4)}


def child(args: argparse.Namespace) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    if args.part == "trl":
        result = trl(args.model_dir, args.url, args.steps, args.out)
    else:
        result = ours(args.model_dir, args.url, args.steps, int(args.part[-1]), args.out)
    Path(args.result).write_text(json.dumps(result))


def run_part(part: str, model_dir: str, url: str, steps: int, tmp: Path) -> dict[str, Any]:
    result = tmp / f"{part}.json"
    argv = [sys.executable, __file__, "--part", part, "--model-dir", model_dir, "--url", url]
    argv += ["--steps", str(steps), "--out", str(tmp / part), "--result", str(result)]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_PORT")}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{part} failed:\n{done.stderr[-4000:]}")
    loaded: dict[str, Any] = json.loads(result.read_text())
    return loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--latency-s", type=float, default=0.3)
    parser.add_argument("--part", choices=["ours0", "ours1", "trl"])
    parser.add_argument("--model-dir")
    parser.add_argument("--url")
    parser.add_argument("--out")
    parser.add_argument("--result")
    args = parser.parse_args()
    if args.part:
        child(args)
        return
    from tribunal.testing.tiny_model import TinyModelConfig, build_tiny_model
    from tribunal.trainer.testing import StandInRewardServer, token_share_reward

    server = StandInRewardServer(token_share_reward("e"), latency_s=args.latency_s).start()
    try:
        with tempfile.TemporaryDirectory() as tmp_dir:
            tmp = Path(tmp_dir)
            rows = [json.loads(line) for line in GSM8K.read_text().splitlines()[:32]]
            model_dir = str(
                build_tiny_model(TinyModelConfig(), [r["question"] for r in rows], tmp / "m", 42)
            )
            parts = {
                p: run_part(p, model_dir, server.url, args.steps, tmp)
                for p in ("ours0", "ours1", "trl")
            }
    finally:
        server.stop()
    best = min(parts["ours0"]["step_s"], parts["ours1"]["step_s"])
    report = {
        "command": "python bench/trainer_overlap.py "
        f"--steps {args.steps} --latency-s {args.latency_s}",
        "model": "random Qwen3, hidden 64, 2 layers (CPU, fp32)",
        "workload": WORKLOAD,
        "reward_latency_s_per_job": args.latency_s,
        "steps_counted": args.steps - 1,
        "async_steps_0": parts["ours0"],
        "async_steps_1": parts["ours1"],
        "trl_grpo_trainer": parts["trl"],
        "reward_wait_under_10pct": parts["ours1"]["reward_wait_share"] < 0.10,
        "step_time_at_most_trl": best <= parts["trl"]["step_s"],
    }
    print(json.dumps(report, indent=2))
    results.record("trainer_overlap", report, tables(report))


def tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' table: seconds per step and its split (means over the counted steps) for
    ``async_steps`` 0 and 1, and TRL's step time."""

    def ours(run: dict[str, Any]) -> list[str]:
        return [
            f"{run['step_s']:.2f}",
            f"{run['generation_s']:.2f}",
            f"{run['reward_wait_s']:.3f}",
            f"{run['train_s']:.2f}",
            f"{100 * run['reward_wait_share']:.1f} %",
        ]

    return [
        results.table(
            ["run", "s / step", "generation", "reward wait", "training", "reward wait share"],
            [
                ["`async_steps: 0`", *ours(report["async_steps_0"])],
                ["`async_steps: 1`", *ours(report["async_steps_1"])],
                [
                    "TRL `GRPOTrainer`",
                    f"{report['trl_grpo_trainer']['step_s']:.2f}",
                    "–",
                    "–",
                    "–",
                    "–",
                ],
            ],
        )
    ]


if __name__ == "__main__":
    main()
