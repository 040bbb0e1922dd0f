"""``tribunal train``: run the trainer from a YAML config (the services' CLI imports this module
only when the command runs, so they never import torch)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import typer

from tribunal.trainer.config import GRPOConfig


def train_command(config_path: Path, output_dir: Path, max_steps: int | None) -> None:
    """Load the config, train, and exit non-zero with a message on a config or reward failure.

    Raises:
        typer.Exit: 2 for a bad config, 1 when scoring failed under ``on_reward_failure: stop``.
    """
    from tribunal.trainer.rewards import RewardFailure

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("httpx", "DeepSpeed", "deepspeed", "datasets", "torch.distributed"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        config = GRPOConfig.from_yaml(
            config_path, {"max_steps": max_steps} if max_steps is not None else None
        )
    except (ValueError, TypeError, OSError) as exc:
        typer.echo(f"tribunal train: {config_path}: {exc}", err=True)
        raise typer.Exit(2) from exc
    if not Path(config.dataset).is_file():
        # The stack configs read bench.training_data's files, made from the public data sets.
        typer.echo(
            f"tribunal train: no dataset at {config.dataset}: the public data sets come with "
            "`tribunal data fetch` (make data), then the stack configs' files with "
            "`python -m bench.training_data runs/stack-data` (as make train does)",
            err=True,
        )
        raise typer.Exit(2)
    from tribunal.trainer.loop import Trainer

    try:
        history = Trainer(config, output_dir).run()
    except RewardFailure as exc:
        typer.echo(f"tribunal train: stopped: reward failure {exc}", err=True)
        raise typer.Exit(1) from exc
    if history and os.environ.get("RANK", "0") == "0":
        typer.echo(f"done: {len(history)} steps; final policy in {output_dir / 'final'}")
