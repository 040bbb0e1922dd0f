"""Train with TRL's GRPOTrainer, rewards from Tribunal's gateway (one request per batch).

    tribunal up                                   # math + gateway (and the rest)
    python examples/trl_grpo.py --model Qwen/Qwen3-0.6B --spec rloo_math --steps 50

The dataset here is a few inline arithmetic questions with a `ground_truth` column; any
dataset whose columns the spec reads works the same way (`tests` for code rows,
`positive_rubrics` / `negative_rubrics` / `evidence` for the refiner specs). The last line
printed is a JSON object with the trainer's log history.
"""

from __future__ import annotations

import argparse
import json
import sys

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from tribunal.integrations.trl import remote_reward

QUESTIONS = [
    (f"What is {a} + {b}? Put the answer in \\boxed{{}}.", str(a + b))
    for a in range(4)
    for b in range(4)
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="Model name or local directory.")
    parser.add_argument("--spec", default="rloo_math", help="Reward spec on the gateway.")
    parser.add_argument("--gateway", default="http://127.0.0.1:8100", help="Gateway URL.")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--output-dir", default="grpo-out")
    args = parser.parse_args()
    dataset = Dataset.from_list([{"prompt": q, "ground_truth": a} for q, a in QUESTIONS])
    config = GRPOConfig(
        output_dir=args.output_dir,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        max_steps=args.steps,
        learning_rate=1e-4,
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
    )
    trainer = GRPOTrainer(
        model=args.model,
        reward_funcs=[remote_reward(args.spec, url=args.gateway)],
        args=config,
        train_dataset=dataset,
    )
    trainer.train()
    sys.stdout.write(json.dumps({"log_history": trainer.state.log_history}) + "\n")


if __name__ == "__main__":
    main()
