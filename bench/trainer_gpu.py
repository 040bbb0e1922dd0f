"""The trainer on a GPU: DeepSpeed ZeRO-3 over NCCL in bf16, a random Qwen3 of about 0.5B
parameters built from a config, HF ``generate`` rollouts, rewards from a local math service
(started here: redis-server, ``tribunal api math`` and ``tribunal worker math``; the embedded
queue when redis-server is absent). Prints one JSON object: seconds per step split into
generation / reward wait / training / weight sync, generated tokens per second, peak GPU
memory; on a GPU, records it (``bench/results/trainer_gpu.json`` with ``--record``).

    python bench/trainer_gpu.py [--steps 4] [--async-steps 1]
    python bench/trainer_gpu.py --tiny        # a CPU dry run of the same script

Single process without a launcher (RANK / WORLD_SIZE are set when absent); under
``torchrun --nproc_per_node N`` every rank trains and rank 0 prints.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench._stack import data_file, free_port, processes, redis_server, tribunal, wait_ready

# Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14/2 heads, MLP 4864) with Qwen's vocabulary
# size: 0.49B parameters; the tokenizer is trained on the prompts (the extra rows are unused).
HALF_B = {
    "hidden_size": 896,
    "num_layers": 24,
    "num_heads": 14,
    "num_kv_heads": 2,
    "head_dim": 64,
    "intermediate_size": 4864,
    "vocab_size": 4000,
    "model_vocab_size": 151936,
}
TINY = {
    "hidden_size": 64,
    "num_layers": 2,
    "num_heads": 4,
    "num_kv_heads": 2,
    "model_vocab_size": 1024,
}
KEYS = ("step_s", "generation_s", "generation_busy_s", "reward_wait_s", "train_s", "weight_sync_s")


@contextlib.contextmanager
def math_service() -> Iterator[str]:
    """A math service on a free port, on Redis when redis-server exists; yields its URL."""
    port = free_port()
    api = tribunal("api", "math", "--port", str(port))
    if shutil.which("redis-server") is None:
        with processes([api], {"TRIBUNAL_QUEUE": "memory"}):
            wait_ready(f"http://127.0.0.1:{port}")
            yield f"http://127.0.0.1:{port}"
        return
    with redis_server() as redis_url:
        env = {"TRIBUNAL_REDIS_URL": redis_url, "TRIBUNAL_QUEUE": "redis"}
        with processes([api, tribunal("worker", "math", "--workers", "1")], env):
            wait_ready(f"http://127.0.0.1:{port}")
            yield f"http://127.0.0.1:{port}"


def run(args: argparse.Namespace, url: str, out: Path) -> dict[str, Any]:
    import torch

    from tribunal.trainer.config import GRPOConfig
    from tribunal.trainer.loop import Trainer

    gpu = torch.cuda.is_available()
    raw = {
        "tiny_model": TINY if args.tiny else HALF_B,
        "dataset": str(data_file("math/gsm8k_test.jsonl")),
        "max_prompts": 256,
        "system_prompt": "Solve the problem and put the final answer in \\boxed{}.",
        "prompts_per_step": args.prompts,
        "group_size": args.group_size,
        "max_steps": args.steps,
        "max_prompt_tokens": 512,
        "max_response_tokens": args.max_tokens,
        "async_steps": args.async_steps,
        "bf16": gpu,
        "learning_rate": 1e-6,
        "reward_sources": [
            {"name": "math", "url": url, "verifier": "math", "fields": {"ground_truth": "answer"}}
        ],
    }
    trainer = Trainer(GRPOConfig.from_dict(raw), out)
    params = sum(p.ds_numel for p in trainer.engine.module.parameters())
    history = trainer.run()
    history = history[1:] or history  # the first step compiles and warms up
    per_step = {k: statistics.mean(m[f"time/{k}"] for m in history) for k in KEYS}
    tokens = statistics.mean(
        m["response_length/mean"] * args.prompts * args.group_size for m in history
    )
    return {
        "rank": trainer.rank,
        "world_size": trainer.world,
        "device": torch.cuda.get_device_name() if gpu else "cpu",
        "software": {name: version(name) for name in ("torch", "transformers", "deepspeed")},
        "parameters": params,
        "dtype": "bf16" if gpu else "fp32",
        "steps_counted": len(history),
        "seconds_per_step": {k: round(v, 3) for k, v in per_step.items()},
        "generated_tokens_per_step": round(tokens),
        "generated_tokens_per_s": round(tokens / per_step["generation_busy_s"], 1),
        "tokens_per_s_end_to_end": round(tokens / per_step["step_s"], 1),
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if gpu else None,
        "reward_mean_last_step": history[-1]["reward/mean"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--async-steps", type=int, choices=[0, 1], default=1)
    parser.add_argument("--tiny", action="store_true", help="tiny model (CPU dry run)")
    args = parser.parse_args()
    with math_service() as url, tempfile.TemporaryDirectory() as tmp:
        result = run(args, url, Path(tmp) / "run")
    if result.pop("rank") != 0:
        return
    print(json.dumps({"command": results.command(), **result}, indent=2))
    if result["device"] == "cpu":
        return  # a dry run: the figures in the docs are a GPU's
    steps = result["seconds_per_step"]
    generation_share = 100 * steps["generation_s"] / steps["step_s"]
    memory = result["peak_gpu_memory_gib"]
    results.record(
        "trainer_gpu",
        result,
        [
            results.table(
                [
                    "GPU",
                    "parameters",
                    "s / step",
                    "generation",
                    "reward wait",
                    "training",
                    "weight sync",
                    "generated tokens/s",
                    "peak GPU memory",
                ],
                [
                    [
                        result["device"],
                        f"{result['parameters'] / 1e9:.2f} B ({result['dtype']})",
                        f"{steps['step_s']:.1f}",
                        f"{steps['generation_s']:.1f} ({generation_share:.0f} %)",
                        f"{steps['reward_wait_s']:.2f}",
                        f"{steps['train_s']:.1f}",
                        f"{steps['weight_sync_s']:.2f}",
                        f"{result['generated_tokens_per_s']:,.0f}",
                        f"{memory:.1f} GiB",
                    ]
                ],
            )
        ],
        note=f"{result['steps_counted']} steps counted (the first, which warms up, is not)",
    )


if __name__ == "__main__":
    main()
