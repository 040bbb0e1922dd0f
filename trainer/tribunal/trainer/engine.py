"""DeepSpeed ZeRO-3 plumbing: process group, engines, gathered weights, policy log-probs.

The recipe that runs on CPU without a compiler, MPI or JIT-built ops (research/trainer.md
§3.3): rendezvous variables for a single process, the shared-memory comm op skipped, torch
AdamW as a client optimizer, no offload, gloo on CPU and NCCL on GPU.
"""

from __future__ import annotations

import os
import socket
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from tribunal.trainer.config import GRPOConfig


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def init_distributed() -> tuple[int, int]:
    """Start the process group (once) and return ``(rank, world_size)``.

    Without a launcher, sets ``RANK=0 WORLD_SIZE=1`` and a free ``MASTER_PORT`` (DeepSpeed
    would otherwise look for MPI). On CPU the ``deepspeed_shm_comm`` op, which DeepSpeed
    compiles with g++ inside ``init_distributed``, is skipped: gloo needs none of it.
    """
    if "RANK" not in os.environ:
        os.environ.update(
            RANK="0",
            WORLD_SIZE="1",
            LOCAL_RANK="0",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(_free_port()),
        )
    import deepspeed

    # DeepSpeed 0.19 still calls these torch 2.13 collectives by their deprecated names
    for name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
        warnings.filterwarnings("ignore", f"`torch.distributed.{name}` is deprecated")
    cuda = torch.cuda.is_available()
    if not cuda:
        # `import deepspeed.comm.torch` would resolve to the real torch module: go through
        # sys.modules (research/trainer.md §3.3).
        sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None  # type: ignore[attr-defined]
    else:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if not torch.distributed.is_initialized():
        deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo")
    return torch.distributed.get_rank(), torch.distributed.get_world_size()


def device() -> torch.device:
    """This rank's device."""
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def ds_config(config: GRPOConfig, groups_per_rank: int, world_size: int) -> dict[str, Any]:
    """The DeepSpeed config: ZeRO-3, one group per micro-batch, one optimizer step per
    training step (gradient accumulation over this rank's groups)."""
    return {
        "train_micro_batch_size_per_gpu": config.group_size,
        "gradient_accumulation_steps": groups_per_rank,
        "train_batch_size": config.group_size * groups_per_rank * world_size,
        "gradient_clipping": config.gradient_clipping,
        "zero_optimization": {
            "stage": 3,
            "stage3_param_persistence_threshold": 0,
            "stage3_gather_16bit_weights_on_model_save": True,
        },
        "zero_force_ds_cpu_optimizer": False,
        "bf16": {"enabled": config.bf16},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def build_engine(model_dir: str, config: GRPOConfig, ds: dict[str, Any], train: bool) -> Any:
    """A ZeRO-3 engine of the model in ``model_dir`` (partitioned at load time).

    Args:
        model_dir: a local Hugging Face model directory.
        config: the run config (learning rate, weight decay).
        ds: the DeepSpeed config.
        train: with a torch AdamW optimizer (False: the frozen reference model).
    """
    import deepspeed
    from transformers import AutoModelForCausalLM
    from transformers.integrations import HfDeepSpeedConfig  # type: ignore[attr-defined]

    keep_alive = HfDeepSpeedConfig(ds)  # type: ignore[no-untyped-call]  # partitions the weights inside from_pretrained
    dtype = torch.bfloat16 if config.bf16 else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    if not train:
        model.requires_grad_(False)
        model.train(False)
        engine, *_ = deepspeed.initialize(model=model, config=ds)
    else:
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
        )
        engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds)
    del keep_alive
    return engine


def gathered_parameters(engine: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(name, full tensor)`` for each parameter, gathering one at a time (every rank
    must iterate it to the end: the gathers are collectives)."""
    import deepspeed

    for name, param in engine.module.named_parameters():
        with deepspeed.zero.GatheredParameters([param], modifier_rank=None):
            yield name, param.data


def completion_logits(
    module: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int
) -> torch.Tensor:
    """Logits that predict the completion tokens.

    Args:
        module: the (engine-wrapped) causal LM.
        input_ids: (G, P + T) prompt then right-padded completion.
        attention_mask: (G, P + T).
        prompt_len: P.

    Returns:
        (G, T, V) float32.
    """
    logits = module(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    out: torch.Tensor = logits[:, prompt_len - 1 : -1].float()
    return out


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float) -> torch.Tensor:
    """``log softmax(logits / temperature)`` at ``tokens``: (G, T, V), (G, T) -> (G, T).

    Computed as the chosen logit minus the log-sum-exp of its row, so that no second
    ``(G, T, V)`` tensor of log-probabilities is written (V is 151,936 for Qwen3).
    """
    scaled = logits / temperature
    chosen = scaled.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return chosen - torch.logsumexp(scaled, dim=-1)
