"""The one training loop: rollouts, rewards over HTTP, GRPO-family update on DeepSpeed ZeRO-3.

Per step ``t``: this rank's groups are generated one after the other, and each group is
submitted for scoring the moment it exists; then the loop waits for the rewards, computes
advantages, runs one micro-batch per group (gradient accumulation) and one optimizer step, and
copies the gathered weights into the generation backend. With ``async_steps = 1`` generation of
step ``t+1`` (with the weights before update ``t``) runs in a thread while step ``t`` is scored
and trained: the policy is then off by one update (logged as ``off_policy_steps``).

Shapes: ``G`` group size, ``B`` completions on this rank, ``T`` completion tokens.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tribunal.testing.tiny_model import build_tiny_model
from tribunal.trainer import engine as ds
from tribunal.trainer.advantages import (
    compute_advantages,
    overlong_penalty,
    tool_call_reward,
    zero_variance_groups,
)
from tribunal.trainer.config import GRPOConfig
from tribunal.trainer.losses import (
    aggregate,
    clipped_policy_loss,
    entropy_from_logits,
    kl_penalty,
)
from tribunal.trainer.metrics import MetricsWriter, StepTensors, allreduce_sums, step_metrics
from tribunal.trainer.model import load_rows, prompt_ids
from tribunal.trainer.rewards import GroupScores, RewardScheduler, RewardSource, build_sources
from tribunal.trainer.rollout import (
    GenerationBackend,
    HFBackend,
    Rollout,
    RolloutGroup,
    SamplingConfig,
    SingleTurn,
    VLLMBackend,
    generate_groups,
    loss_mask,
)
from tribunal.trainer.tools import CodeRunner, ToolLoop

logger = logging.getLogger(__name__)


@dataclass
class StepBatch:
    """One step's groups on this rank, with their reward futures."""

    step: int
    groups: list[RolloutGroup]
    futures: list[concurrent.futures.Future[GroupScores]]
    generation_s: float


class Trainer:
    """GRPO / RLOO / Dr. GRPO on DeepSpeed ZeRO-3 with rewards from HTTP services.

    Args:
        config: the run config.
        output_dir: checkpoints, ``metrics.jsonl``, TensorBoard, ``final/``.
        backend: a generation backend to use instead of the configured one (tests).
        sources: reward sources to use instead of the configured ones (tests).
    """

    def __init__(
        self,
        config: GRPOConfig,
        output_dir: str | Path,
        backend: GenerationBackend | None = None,
        sources: list[RewardSource] | None = None,
    ) -> None:
        self.config = config
        self.output_dir = Path(output_dir)
        self.rank, self.world = ds.init_distributed()
        if config.prompts_per_step % self.world:
            raise ValueError(
                f"prompts_per_step={config.prompts_per_step} must be a multiple of the "
                f"number of processes ({self.world})"
            )
        self.groups_per_rank = config.prompts_per_step // self.world
        torch.manual_seed(config.seed)
        self.model_dir = self._model_dir()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        rows = load_rows(config.dataset, config.max_prompts)
        self.prompts = [(prompt_ids(config, self.tokenizer, row), row) for row in rows]
        dtype = torch.bfloat16 if config.bf16 else torch.float32
        if backend is None and config.rollout_backend == "hf":
            # loaded before any HfDeepSpeedConfig exists: a plain, unpartitioned copy
            generator = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=dtype)
            generator.to(ds.device())  # type: ignore[arg-type]
            backend = HFBackend(generator, self.tokenizer, self._sampling())
        ds_cfg = ds.ds_config(config, self.groups_per_rank, self.world)
        self.engine = ds.build_engine(self.model_dir, config, ds_cfg, train=True)
        self.reference = (
            ds.build_engine(self.model_dir, config, ds_cfg, train=False) if config.beta else None
        )
        self.start_step = self._resume()
        if backend is None:
            if config.rollout_backend != "vllm":
                raise ValueError(f"rollout_backend: unknown backend {config.rollout_backend!r}")
            backend = VLLMBackend(self.model_dir, self._sampling(), dtype="bfloat16")
        self.backend = backend
        self.code_runner: CodeRunner | None = None
        self.rollout = self._rollout(backend)
        self.scheduler = RewardScheduler(
            sources if sources is not None else build_sources(config),
            config.on_reward_failure,
            self._run_id(),
        )
        self.writer = MetricsWriter(self.output_dir, self.rank == 0)

    # ----------------------------------------------------------------- setup
    def _sampling(self) -> SamplingConfig:
        return SamplingConfig(self.config.temperature, self.config.top_p)

    def _model_dir(self) -> str:
        if self.config.model is not None:
            return self.config.model
        assert self.config.tiny_model is not None
        target = self.output_dir / "base_model"
        if self.rank == 0 and not (target / "config.json").exists():
            rows = load_rows(self.config.dataset, self.config.max_prompts)
            texts = [str(row[self.config.prompt_field]) for row in rows]
            build_tiny_model(self.config.tiny_model, texts, target, self.config.seed)
        torch.distributed.barrier()
        return str(target)

    def _run_id(self) -> str:
        """A run id kept in the output directory, so a resumed run reuses its idempotency
        keys and a new run never collides with an old one."""
        path = self.output_dir / "run_id"
        if self.rank == 0 and not path.exists():
            self.output_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(uuid.uuid4().hex[:12])
        torch.distributed.barrier()
        return path.read_text().strip()

    def _rollout(self, backend: GenerationBackend) -> Rollout:
        tools = self.config.tools
        if tools is None:
            return SingleTurn(backend, self.tokenizer, self.config.max_response_tokens)
        self.code_runner = CodeRunner(tools.code_url, tools.timeout_s, tools.max_tool_output_chars)
        return ToolLoop(
            backend,
            self.tokenizer,
            self.code_runner,
            tools.max_turns,
            self.config.max_response_tokens,
        )

    def _resume(self) -> int:
        """Load the latest checkpoint if there is one; return the first step to run."""
        checkpoints = self.output_dir / "checkpoints"
        if not (checkpoints / "latest").exists():
            return 0
        _, client_state = self.engine.load_checkpoint(str(checkpoints))
        step = int(client_state["step"])
        logger.info("resumed from %s at step %d", checkpoints, step)
        return step

    # ------------------------------------------------------------- rollouts
    def _prompts_for(self, step: int) -> list[tuple[int, list[int], dict[str, Any]]]:
        """This rank's prompts of ``step``: an order reshuffled every epoch with the seed,
        so a resumed run sees the same prompts."""
        n = len(self.prompts)
        out = []
        for k in range(self.rank, self.config.prompts_per_step, self.world):
            position = step * self.config.prompts_per_step + k
            epoch, offset = divmod(position, n)
            order = torch.randperm(
                n, generator=torch.Generator().manual_seed(self.config.seed + epoch)
            )
            ids, row = self.prompts[int(order[offset])]
            out.append((k, ids, row))
        return out

    def _generate(self, step: int) -> StepBatch:
        start = time.perf_counter()
        futures: list[concurrent.futures.Future[GroupScores]] = []
        groups = generate_groups(
            self.rollout,
            self._prompts_for(step),
            step,
            self.config.group_size,
            self.config.seed,
            on_group=lambda group: futures.append(self.scheduler.submit(group)),
        )
        return StepBatch(step, groups, futures, time.perf_counter() - start)

    def _sync_weights(self) -> None:
        self.backend.sync_weights(ds.gathered_parameters(self.engine))

    # ------------------------------------------------------------- the loop
    def run(self) -> list[dict[str, Any]]:
        """Train from the start (or resumed) step to ``max_steps``; return the step metrics.

        Raises:
            RewardFailure: scoring failed under ``on_reward_failure: stop``.
        """
        from rich.progress import Progress

        history: list[dict[str, Any]] = []
        executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rollout")
        self._sync_weights()
        steps = range(self.start_step, self.config.max_steps)
        try:
            with Progress(disable=self.rank != 0, transient=True) as progress:
                task = progress.add_task("training", total=len(steps))
                pending = executor.submit(self._generate, self.start_step) if steps else None
                for step in steps:
                    assert pending is not None
                    metrics, pending = self._step(step, pending, executor)
                    history.append(metrics)
                    line = self.writer.write(metrics)
                    if self.rank == 0 and step % self.config.log_every == 0:
                        progress.console.print(line)
                    progress.advance(task)
                    self._maybe_checkpoint(step + 1)
            self._export()
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
            self.scheduler.close()
            self.writer.close()
            if self.code_runner is not None:
                self.code_runner.close()
        return history

    def _step(
        self,
        step: int,
        pending: concurrent.futures.Future[StepBatch],
        executor: concurrent.futures.ThreadPoolExecutor,
    ) -> tuple[dict[str, Any], concurrent.futures.Future[StepBatch]]:
        started = time.perf_counter()
        batch = pending.result()
        generation_wait = time.perf_counter() - started
        last = step + 1 >= self.config.max_steps
        if self.config.async_steps and not last:
            pending = executor.submit(self._generate, step + 1)
        mark = time.perf_counter()
        metrics, reward_wait = self._train(batch)
        train_s = time.perf_counter() - mark - reward_wait
        if self.config.async_steps and not last:
            mark = time.perf_counter()
            pending.result()
            generation_wait += time.perf_counter() - mark
        mark = time.perf_counter()
        self._sync_weights()
        sync_s = time.perf_counter() - mark
        if not self.config.async_steps and not last:
            pending = executor.submit(self._generate, step + 1)
        timing = {
            "time/generation_s": generation_wait,
            "time/generation_busy_s": batch.generation_s,
            "time/reward_wait_s": reward_wait,
            "time/train_s": train_s,
            "time/weight_sync_s": sync_s,
            "time/step_s": time.perf_counter() - started,
        }
        timing = {k: v / self.world for k, v in allreduce_sums(timing).items()}
        return {
            "step": step + 1,
            "off_policy_steps": self.config.async_steps,
            **metrics,
            **timing,
        }, pending

    # ------------------------------------------------------------- training
    def _rewards(self, groups: list[RolloutGroup], scores: list[GroupScores]) -> torch.Tensor:
        """(B,) rewards after shaping: tool-call reward and DAPO's overlong penalty."""
        rewards = torch.tensor([r for s in scores for r in s.rewards], dtype=torch.float32)
        completions = [c for g in groups for c in g.completions]
        tools = self.config.tools
        if tools is not None and tools.tool_call_reward:
            turns = torch.tensor([c.num_turns for c in completions])
            rewards = tool_call_reward(2 * rewards - 1, turns)  # [0, 1] -> math_dapo's ±1
        if self.config.overlong_buffer_tokens:
            lengths = torch.tensor([len(c.token_ids) for c in completions])
            rewards = rewards + overlong_penalty(
                lengths,
                self.config.max_response_tokens,
                self.config.overlong_buffer_tokens,
                self.config.overlong_penalty_factor,
            )
        return rewards

    def _train(self, batch: StepBatch) -> tuple[dict[str, Any], float]:
        """Train on one step's groups in the order their rewards arrive (a group's advantages
        need only its own rewards), so that scoring of the last groups overlaps training on
        the first. Returns the metrics and the seconds spent waiting for rewards.

        The loss normaliser counts every loss token (or sequence, or completion) of the step,
        known before any reward: a dropped or skipped group adds 0 to the loss but keeps its
        tokens in the denominator (as an unscorable completion does in TRL). With
        ``std_scaling: batch`` every reward is needed first, so the step waits for all.
        """
        cfg, size, groups = self.config, self.config.group_size, batch.groups
        base = [loss_mask(g.completions, True, cfg.mask_truncated_completions) for g in groups]
        totals = allreduce_sums(
            {
                "tokens": float(sum(m.sum() for m in base)),
                "sequences": float(sum((m.sum(-1) > 0).sum() for m in base)),
                "completions": float(len(groups) * size),
            }
        )
        waited = 0.0
        index = {future: i for i, future in enumerate(batch.futures)}
        arrivals = concurrent.futures.as_completed(index)
        batch_std = cfg.advantage_estimator == "grpo" and cfg.std_scaling == "batch"
        if batch_std:
            mark = time.perf_counter()
            concurrent.futures.wait(index)
            waited += time.perf_counter() - mark
            all_rewards = self._rewards(groups, [f.result() for f in batch.futures])
            batch_adv = compute_advantages(all_rewards, size, "grpo", "batch")
        rewards = torch.full((len(groups) * size,), math.nan)
        advantages = torch.zeros(len(groups) * size)
        zero_var = torch.zeros(len(groups), dtype=torch.bool)
        scores: list[GroupScores] = [GroupScores(rewards=[])] * len(groups)
        sums: Counter[str] = Counter()
        for _ in groups:
            mark = time.perf_counter()
            future = next(arrivals)
            waited += time.perf_counter() - mark
            i, rows = index[future], slice(index[future] * size, (index[future] + 1) * size)
            scores[i] = future.result()
            rewards[rows] = self._rewards([groups[i]], [scores[i]])
            advantages[rows] = (
                batch_adv[rows]
                if batch_std
                else compute_advantages(
                    rewards[rows], size, cfg.advantage_estimator, cfg.std_scaling
                )
            )
            zero_var[i] = (
                bool(zero_variance_groups(rewards[rows], size)[0]) and not scores[i].dropped
            )
            keep = not scores[i].dropped and not (cfg.skip_zero_variance_groups and zero_var[i])
            sums.update(self._micro_step(groups[i], advantages[rows], base[i] * keep, totals))
        metrics = step_metrics(
            StepTensors(groups, scores, rewards, advantages, zero_var), sums, totals
        )
        grad_norm = self.engine.get_global_grad_norm()
        metrics["grad_norm"] = None if grad_norm is None else float(grad_norm)
        return metrics, waited

    def _batch_tensors(
        self, group: RolloutGroup, width: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """input_ids (G, P+T), attention_mask (G, P+T), old_logprobs (G, T)."""
        pad = self.tokenizer.pad_token_id
        rows, attn, old = [], [], []
        for c in group.completions:
            fill = width - len(c.token_ids)
            rows.append(group.prompt_ids + c.token_ids + [pad] * fill)
            attn.append([1] * (len(group.prompt_ids) + len(c.token_ids)) + [0] * fill)
            old.append(c.old_logprobs + [0.0] * fill)
        dev = ds.device()
        return (
            torch.tensor(rows, device=dev),
            torch.tensor(attn, device=dev),
            torch.tensor(old, device=dev, dtype=torch.float32),
        )

    def _micro_step(
        self,
        group: RolloutGroup,
        advantages: torch.Tensor,
        mask: torch.Tensor,
        totals: dict[str, float],
    ) -> Counter[str]:
        """Forward and backward of one group; the loss is normalised by the whole step's
        (all ranks') tokens, sequences or completions, so accumulated micro-batches add up to
        the configured aggregation."""
        cfg = self.config
        ids, attn, old = self._batch_tensors(group, mask.shape[1])
        prompt_len = len(group.prompt_ids)
        tokens = ids[:, prompt_len:]
        mask = mask.to(ids.device)
        logits = ds.completion_logits(self.engine, ids, attn, prompt_len)
        logp = ds.token_logprobs(logits, tokens, cfg.temperature)
        out = clipped_policy_loss(
            logp, old, advantages.to(ids.device), cfg.epsilon_low, cfg.epsilon_high, cfg.dual_clip
        )
        per_token = out.per_token
        kl = torch.zeros_like(per_token)
        if self.reference is not None:
            with torch.no_grad():
                ref_logits = ds.completion_logits(self.reference, ids, attn, prompt_len)
                ref_logp = ds.token_logprobs(ref_logits, tokens, cfg.temperature)
            kl = kl_penalty(logp, ref_logp, cfg.kl_estimator)
            per_token = per_token + cfg.beta * kl
        loss = aggregate(
            per_token,
            mask,
            cfg.loss_aggregation,
            constant=cfg.max_response_tokens,
            token_count=totals["tokens"],
            sequence_count=totals["sequences"],
            completion_count=totals["completions"],
        )
        self.engine.backward(loss * self.world, scale_wrt_gas=False)
        self.engine.step()
        with torch.no_grad():
            entropy = entropy_from_logits(logits)
        return Counter(
            {
                "loss": float(loss.detach()),
                "kept_tokens": float(mask.sum()),
                "kl": float((kl.detach() * mask).sum()),
                "clipped": float((out.is_clipped.float() * mask).sum()),
                "ratio": float((out.ratio.detach() * mask).sum()),
                "entropy": float((entropy * mask).sum()),
            }
        )

    # ------------------------------------------------------------- outputs
    def _maybe_checkpoint(self, done: int) -> None:
        every = self.config.save_every
        if done == self.config.max_steps or (every and done % every == 0):
            tag = f"step_{done}"
            self.engine.save_checkpoint(
                str(self.output_dir / "checkpoints"), tag=tag, client_state={"step": done}
            )

    def _export(self) -> None:
        """Save the final policy with ``save_pretrained``: rank 0 saves the synced generation
        copy; without one (vLLM), every rank joins the gather of ``save_16bit_model``."""
        final = self.output_dir / "final"
        model = getattr(self.backend, "model", None)
        if model is None:
            self.engine.save_16bit_model(str(final), "pytorch_model.bin")
        if self.rank == 0:
            self.tokenizer.save_pretrained(final)
            if model is not None:
                model.save_pretrained(final)
            else:
                self.engine.module.config.save_pretrained(final)


def train(config: GRPOConfig, output_dir: str | Path) -> list[dict[str, Any]]:
    """Build a :class:`Trainer` and run it; return the step metrics."""
    return Trainer(config, output_dir).run()
