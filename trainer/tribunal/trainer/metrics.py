"""Per-step metrics: summed across ranks, written to ``metrics.jsonl``, the console and
TensorBoard (when ``tensorboard`` is installed)."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tribunal.trainer.rewards import GroupScores
from tribunal.trainer.rollout import RolloutGroup


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


@dataclass
class StepTensors:
    """One step's groups on this rank with their scores, rewards (B,) (NaN: unscorable),
    advantages (B,) and zero-variance flags (P,)."""

    groups: list[RolloutGroup]
    scores: list[GroupScores]
    rewards: torch.Tensor
    advantages: torch.Tensor
    zero_var: torch.Tensor


def _local_sums(step: StepTensors, sums: Counter[str]) -> dict[str, float]:
    completions = [c for g in step.groups for c in g.completions]
    scored = step.rewards[~torch.isnan(step.rewards)]
    local: dict[str, float] = {
        **{k: float(v) for k, v in sums.items()},
        "reward_sum": float(scored.sum()),
        "reward_sq": float((scored**2).sum()),
        "reward_n": float(scored.numel()),
        "adv_sum": float(step.advantages.sum()),
        "adv_sq": float((step.advantages**2).sum()),
        "adv_abs": float(step.advantages.abs().sum()),
        "length_sum": float(sum(len(c.token_ids) for c in completions)),
        "truncated": float(sum(c.is_truncated for c in completions)),
        "turns": float(sum(c.num_turns for c in completions)),
        "tool_calls": float(sum(c.tool_calls for c in completions)),
        "dropped": float(sum(s.dropped for s in step.scores)),
        "retries": float(sum(s.retries for s in step.scores)),
        "zero_variance": float(step.zero_var.sum()),
        "groups": float(len(step.groups)),
    }
    return local


def _component_sums(scores: list[GroupScores]) -> Counter[str]:
    """Sum, sum of squares and count of each component's scored rewards on this rank. A
    spec's components come only with a scored source, so the names may differ between
    groups and ranks."""
    sums: dict[str, float] = {}
    for name in dict.fromkeys(n for s in scores for n in s.components):
        values = torch.tensor([r for s in scores for r in s.components.get(name, ())])
        values = values[~torch.isnan(values)]
        sums[f"{name}/sum"] = float(values.sum())
        sums[f"{name}/sq"] = float((values**2).sum())
        sums[f"{name}/n"] = float(values.numel())
    return Counter(sums)


def step_metrics(step: StepTensors, sums: Counter[str], totals: dict[str, float]) -> dict[str, Any]:
    """The step's metrics over all ranks: rewards (overall, per source, and per component of
    a reward spec as ``reward/<spec>/<component>/mean``), advantages, loss,
    KL, clip fraction, ratio, entropy, lengths, tool use, dropped / retried / zero-variance
    groups and reward errors by class. NaN (nothing scored) becomes None.

    Args:
        step: this rank's groups and tensors.
        sums: per-token sums of the micro-steps (``loss``, ``kl``, ``clipped``, ``ratio``,
            ``entropy``, ``kept_tokens``).
        totals: the step's completions over all ranks.
    """
    g = allreduce_sums(_local_sums(step, sums))
    n, tokens = totals["completions"], max(g["kept_tokens"], 1.0)
    reward_mean, reward_std = mean_std(g["reward_sum"], g["reward_sq"], g["reward_n"])
    adv_mean, adv_std = mean_std(g["adv_sum"], g["adv_sq"], n)
    metrics: dict[str, Any] = {
        "reward/mean": reward_mean,
        "reward/std": reward_std,
        "reward/scored_fraction": g["reward_n"] / n,
        "advantages/mean": adv_mean,
        "advantages/std": adv_std,
        "advantages/abs_mean": g["adv_abs"] / n,
        "loss": g["loss"],
        "kl": g["kl"] / tokens,
        "clip_fraction": g["clipped"] / tokens,
        "ratio/mean": g["ratio"] / tokens,
        "entropy": g["entropy"] / tokens,
        "loss_tokens": g["kept_tokens"],
        "response_length/mean": g["length_sum"] / n,
        "truncated_fraction": g["truncated"] / n,
        "turns/mean": g["turns"] / n,
        "tool_calls/mean": g["tool_calls"] / n,
        "groups/dropped": g["dropped"],
        "groups/retries": g["retries"],
        "groups/zero_variance": g["zero_variance"],
        "groups/total": g["groups"],
    }
    c = allreduce_counters(_component_sums(step.scores))
    for name in sorted({key.rsplit("/", 1)[0] for key in c}):
        mean, std = mean_std(c[f"{name}/sum"], c[f"{name}/sq"], c[f"{name}/n"])
        metrics[f"reward/{name}/mean"], metrics[f"reward/{name}/std"] = mean, std
    errors: Counter[str] = Counter()
    for s in step.scores:
        errors.update({f"reward_errors/{k}": v for k, v in s.item_errors.items()})
        errors.update({f"reward_failures/{k}": v for k, v in s.failures.items()})
    metrics.update(allreduce_counters(errors))
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}
