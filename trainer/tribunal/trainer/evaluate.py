"""pass@1 / pass@k of a policy on a config's dataset, scored by the config's reward sources.

``n`` completions per prompt with Hugging Face ``generate`` (the config's sampling), one job
per prompt through the same reward path as training; a completion passes when its reward is
at least ``threshold``. Unscorable completions (reward None) count as not passing and are
reported.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tribunal.trainer.config import GRPOConfig
from tribunal.trainer.rewards import build_sources, score_group


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator of Chen et al. (2021, arXiv 2107.03374, eq. 1).

    ``1 - C(n - c, k) / C(n, k)``: the chance that at least one of k completions drawn without
    replacement from n, of which c pass, passes. Not ``1 - (1 - c/n)^k``.

    Args:
        n: completions sampled.
        c: completions that passed (0 <= c <= n).
        k: budget (1 <= k <= n).

    Raises:
        ValueError: k outside ``[1, n]`` or c outside ``[0, n]``.

    Examples:
        >>> pass_at_k(4, 1, 2)
        0.5
    """
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs 1 <= k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def evaluate(
    config: GRPOConfig, model_dir: str | Path, n: int, ks: Sequence[int], threshold: float = 1.0
) -> dict[str, Any]:
    """Sample ``n`` completions per prompt from ``model_dir`` and report pass@k for ``ks``.

    Args:
        config: dataset, prompt format, sampling and reward sources.
        model_dir: a ``save_pretrained`` directory (e.g. a run's ``final/``).
        n: completions per prompt.
        ks: the k of each pass@k (each <= n).
        threshold: the reward a completion needs to pass.

    Returns:
        ``{"prompts", "n", "pass@<k>"..., "unscorable"}``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tribunal.trainer.model import load_rows, prompt_ids
    from tribunal.trainer.rollout import HFBackend, SamplingConfig, SingleTurn, generate_groups

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    backend = HFBackend(model, tokenizer, SamplingConfig(config.temperature, config.top_p))
    rollout = SingleTurn(backend, tokenizer, config.max_response_tokens)
    rows = load_rows(config.dataset, config.max_prompts)
    prompts = [(i, prompt_ids(config, tokenizer, row), row) for i, row in enumerate(rows)]
    groups = generate_groups(rollout, prompts, 0, n, config.seed, on_group=lambda group: None)

    async def score_all() -> list[list[float]]:
        sources = build_sources(config)
        try:
            scored = await asyncio.gather(
                *(score_group(sources, g, f"eval-{g.index}", "stop") for g in groups)
            )
        finally:
            for source in sources:
                await source.aclose()
        return [s.rewards for s in scored]

    rewards = asyncio.run(score_all())
    passed = [sum(r >= threshold for r in group if not math.isnan(r)) for group in rewards]
    result: dict[str, Any] = {"prompts": len(groups), "n": n}
    for k in ks:
        result[f"pass@{k}"] = sum(pass_at_k(n, c, k) for c in passed) / max(len(passed), 1)
    result["unscorable"] = sum(math.isnan(r) for group in rewards for r in group)
    return result
