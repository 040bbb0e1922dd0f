"""Per-step metrics: summed across ranks, written to ``metrics.jsonl``, the console and
TensorBoard (when ``tensorboard`` is installed)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import torch


def allreduce_sums(values: dict[str, float]) -> dict[str, float]:
    """Sum each value over the ranks (the keys must be the same on every rank)."""
    if not torch.distributed.is_initialized() or torch.distributed.get_world_size() == 1:
        return dict(values)
    keys = sorted(values)
    tensor = torch.tensor([values[k] for k in keys], dtype=torch.float64)
    if torch.distributed.get_backend() == "nccl":
        tensor = tensor.cuda()
    torch.distributed.all_reduce(tensor)
    return dict(zip(keys, tensor.cpu().tolist(), strict=True))


def allreduce_counters(counter: Counter[str]) -> Counter[str]:
    """Sum a counter whose keys may differ between ranks."""
    if not torch.distributed.is_initialized() or torch.distributed.get_world_size() == 1:
        return Counter(counter)
    gathered: list[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, dict(counter))
    total: Counter[str] = Counter()
    for part in gathered:
        total.update(part)
    return total


def mean_std(total: float, total_sq: float, count: float) -> tuple[float, float]:
    """Mean and population std from a sum, a sum of squares and a count (NaN if empty)."""
    if count <= 0:
        return math.nan, math.nan
    mean = total / count
    return mean, math.sqrt(max(total_sq / count - mean * mean, 0.0))


class MetricsWriter:
    """Writes one JSON object per step to ``<output_dir>/metrics.jsonl`` (appending, so a
    resumed run continues the file), a console line, and TensorBoard scalars.

    Args:
        output_dir: the run directory.
        is_writer: only rank 0 writes.
    """

    CONSOLE_KEYS = (
        "reward/mean",
        "loss",
        "kl",
        "clip_fraction",
        "response_length/mean",
        "time/generation_s",
        "time/reward_wait_s",
        "time/train_s",
    )

    def __init__(self, output_dir: Path, is_writer: bool) -> None:
        self.is_writer = is_writer
        self.path = output_dir / "metrics.jsonl"
        self._tb: Any = None
        if is_writer:
            output_dir.mkdir(parents=True, exist_ok=True)
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional
                pass
            else:
                self._tb = SummaryWriter(str(output_dir / "tensorboard"))

    def write(self, metrics: dict[str, Any]) -> str:
        """Record one step; return the console line."""
        line = f"step {metrics['step']}: " + " ".join(
            f"{key.split('/')[-1] if key.startswith('time/') else key}={metrics[key]:.4g}"
            for key in self.CONSOLE_KEYS
            if isinstance(metrics.get(key), float | int)
        )
        if not self.is_writer:
            return line
        with self.path.open("a") as out:
            out.write(json.dumps(metrics, allow_nan=True) + "\n")
        if self._tb is not None:
            for key, value in metrics.items():
                if isinstance(value, float | int) and key != "step":
                    self._tb.add_scalar(key, value, metrics["step"])
            self._tb.flush()
        return line

    def close(self) -> None:
        """Close TensorBoard's writer."""
        if self._tb is not None:
            self._tb.close()
