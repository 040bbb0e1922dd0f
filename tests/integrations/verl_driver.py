"""verl 0.9.1's own code, run for tests/integrations/test_verl.py in a process of its own.

It runs in verl's own environment (.venv-verl: verl as its users install it, from
requirements/trainer-envs/verl.txt, its Hydra on the ANTLR 4.9 runtime, and tribunal-client),
never in Tribunal's venv, whose math-verify holds ANTLR 4.13. One process serves the test
session: a JSON request a line on stdin, a JSON answer a line on stdout; an exception verl
raises is the answer ``{"error": {"type", "message"}}`` (what a verl user would see in the
log). Each request runs in a child forked for it, so it starts from the state verl's imports
leave (no Hydra global, event loop or registry of an earlier request), while those imports,
most of a request's time, are paid once; whatever verl prints goes to stderr.

Requests (``op``):

- ``load``: compose ``config`` (``ppo_trainer`` or ``fully_async_ppo_trainer``, the latter
  migrated as its entry point does) with ``overrides``; verl's ``get_custom_reward_fn`` and
  ``load_reward_manager``: what they loaded.
- ``reward_loop``: verl's ``RewardLoopWorker`` over a ``DataProto`` of ``rollouts``, then
  ``RewardLoopManager.compute_rm_score``'s merge of the outputs as verl writes it.
- ``sandbox_fusion``: verl's ``default_compute_score`` with ``sandbox_fusion_url``.
- ``managers``: each of ``runs`` (a reward-loop manager through ``reward_loop``, or a legacy
  ``verl.workers.reward_manager`` one called on the ``DataProto``, each with the custom
  function it names) over the same ``rollouts``: the scores each gives, or its error
  (``remote_scores`` for the ``remote`` manager, whose Ray actors are not started).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
import verl
from hydra import compose, initialize_config_dir
from verl import DataProto
from verl.trainer.ppo.reward import get_custom_reward_fn, load_reward_manager

with warnings.catch_warnings():
    # verl 0.9.1 imports Ray's state API from its old place (a DeprecationWarning in Ray 2.60).
    warnings.simplefilter("ignore", DeprecationWarning)
    from verl.experimental.reward_loop import RewardLoopWorker, migrate_legacy_reward_impl

CONFIGS = {
    "ppo_trainer": Path(verl.__file__).parent / "trainer" / "config",
    "fully_async_ppo_trainer": Path(verl.__file__).parent
    / "experimental"
    / "fully_async_policy"
    / "config",
}


def config_of(name: str, overrides: list[str]) -> Any:
    """verl's ``name`` yaml composed with ``overrides`` as its entry point composes it."""
    with initialize_config_dir(config_dir=str(CONFIGS[name]), version_base=None):
        config = compose(name, overrides=overrides)
    return migrate_legacy_reward_impl(config) if name == "fully_async_ppo_trainer" else config


def close_thread_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close the event loop verl set for this thread."""
    asyncio.set_event_loop(None)
    loop.close()


def load(request: dict[str, Any]) -> dict[str, Any]:
    config = config_of(request["config"], request["overrides"])
    loaded = get_custom_reward_fn(config)
    if loaded is None:
        return {"function": None}
    function = loaded.args[0]
    manager = load_reward_manager(config, tokenizer=None)
    close_thread_loop(manager.loop)
    return {
        "function": f"{function.__module__}.{function.__qualname__}",
        "reward_kwargs": loaded.args[1],
        "manager": type(manager).__name__,
        "awaited": manager.is_async_reward_score,
    }


def data_proto(
    tokenizer: Any,
    rollouts: list[list[Any]],
    num_turns: int | None,
    extra_fields: dict[str, Any] | None = None,
) -> DataProto:
    """A ``DataProto`` as verl's agent loop hands it to the reward loop: left-padded prompt
    ids, right-padded response ids ending in the EOS token, one attention mask over both;
    ``extra_fields``, the agent loop's output fields of every sample (``tool_extra_fields``:
    ``min_global_steps`` / ``max_global_steps`` as verl's rollout servers stamp them)."""
    prompts = [tokenizer.encode(r[1], add_special_tokens=False) for r in rollouts]
    responses = [
        [*tokenizer.encode(r[2], add_special_tokens=False), tokenizer.eos_token_id]
        for r in rollouts
    ]
    p_len, r_len = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])
    mask = torch.tensor(
        [
            [0] * (p_len - len(p)) + [1] * (len(p) + len(r)) + [0] * (r_len - len(r))
            for p, r in zip(prompts, responses, strict=True)
        ]
    )
    non_tensors: dict[str, Any] = {
        "data_source": np.array([r[0] for r in rollouts], dtype=object),
        "reward_model": np.array([{"ground_truth": r[3]} for r in rollouts], dtype=object),
        "extra_info": np.array([dict(r[4]) for r in rollouts], dtype=object),
    }
    if num_turns is not None:
        non_tensors["__num_turns__"] = np.array([num_turns] * len(rollouts), dtype=np.int32)
    if extra_fields is not None:
        non_tensors["tool_extra_fields"] = np.array(
            [dict(extra_fields) for _ in rollouts], dtype=object
        )
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_ids,
            "responses": response_ids,
            "input_ids": torch.cat([prompt_ids, response_ids], dim=1),
            "attention_mask": mask,
        },
        non_tensors=non_tensors,
    )


def reward_loop(request: dict[str, Any]) -> dict[str, Any]:
    overrides = [*request["overrides"], f"actor_rollout_ref.model.path={request['tokenizer']}"]
    worker = RewardLoopWorker(config_of("ppo_trainer", overrides))
    proto = data_proto(
        worker.input_tokenizer,
        request["rollouts"],
        request.get("num_turns"),
        request.get("extra_fields"),
    )
    # The worker and its manager take the thread's event loop when built (as in a Ray actor)
    # and schedule on it: run on that one.
    try:
        outputs = worker.loop.run_until_complete(worker.compute_score_batch(proto))
    finally:
        close_thread_loop(worker.loop)
    scores = [out["reward_score"] for out in outputs]
    rm_scores = worker.reward_manager.assemble_rm_scores(proto, scores)
    infos = [out.get("reward_extra_info", {}) for out in outputs]
    merged = {key: np.array([info[key] for info in infos]).tolist() for key in infos[0]}
    return {"scores": scores, "rm_scores": rm_scores.sum(dim=1).tolist(), "extra": merged}


def sandbox_fusion(request: dict[str, Any]) -> dict[str, Any]:
    import multiprocessing

    from verl.utils.reward_score import default_compute_score

    semaphore = multiprocessing.Manager().Semaphore(2)
    return {
        "scores": [
            default_compute_score(
                "codecontests",
                response,
                request["ground_truth"],
                sandbox_fusion_url=request["url"],
                concurrent_semaphore=semaphore,
                memory_limit_mb=1024,
            )
            for response in request["responses"]
        ]
    }


def legacy_scores(request: dict[str, Any], manager: str, tokenizer: Any) -> list[float]:
    """A legacy manager's reward per sample: verl's reward tensor, summed over tokens."""
    from verl.workers.reward_manager import get_reward_manager_cls

    config = config_of("ppo_trainer", request["overrides"])
    function = get_custom_reward_fn(config)
    cls = get_reward_manager_cls(manager)
    proto = data_proto(tokenizer, request["rollouts"], None)
    reward = cls(tokenizer=tokenizer, num_examine=0, compute_score=function)(proto)
    return [float(v) for v in reward.sum(dim=1).tolist()]


def remote_scores(request: dict[str, Any], tokenizer: Any) -> list[float]:
    """The reward-loop ``remote`` manager: built with the function (it refuses an async one),
    then the function called as its Ray actor ``RewardComputeWorker.compute_score`` calls it,
    shipped there by pickle, and read as ``run_single`` reads it (``result["score"]``). The
    actors themselves are not started: a local Ray takes minutes on a loaded 2-core machine."""
    import pickle

    from verl.experimental.reward_loop.reward_manager.remote import RemoteRewardManager

    config = config_of("ppo_trainer", request["overrides"])
    function = get_custom_reward_fn(config)
    if inspect.iscoroutinefunction(function):
        # The manager's own check, which comes before it starts its actors: it raises.
        RemoteRewardManager(config, tokenizer, function)
    shipped = pickle.loads(pickle.dumps(function))
    scores = []
    for source, _, response, truth, extra in request["rollouts"]:
        result = shipped(
            data_source=source, solution_str=response, ground_truth=truth, extra_info=dict(extra)
        )
        scores.append(float(result["score"] if isinstance(result, dict) else result))
    return scores


def managers(request: dict[str, Any]) -> dict[str, Any]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(request["tokenizer"])
    answers: dict[str, Any] = {}
    for run in request["runs"]:
        key = f"{run['kind']} {run['manager']} {run['function']}"
        overrides = [
            *request["overrides"],
            f"reward.custom_reward_function.name={run['function']}",
        ]
        try:
            if run["kind"] == "legacy":
                answers[key] = legacy_scores(
                    {**request, "overrides": overrides}, run["manager"], tokenizer
                )
            elif run["manager"] == "remote":
                answers[key] = remote_scores({**request, "overrides": overrides}, tokenizer)
            else:
                overrides.append(f"reward.reward_manager.name={run['manager']}")
                answers[key] = reward_loop({**request, "overrides": overrides})["scores"]
        except Exception as exc:
            answers[key] = {"error": type(exc).__name__}
    return answers


def answer_of(request: dict[str, Any]) -> Any:
    """The answer to one request: its op's, or the exception it raised."""
    ops = {
        "load": load,
        "reward_loop": reward_loop,
        "sandbox_fusion": sandbox_fusion,
        "managers": managers,
    }
    try:
        return ops[request["op"]](request)
    except Exception as exc:
        return {"error": {"type": type(exc).__name__, "message": str(exc)}}


def main() -> None:
    for line in sys.stdin:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            os.dup2(2, 1)  # verl's prints must not be read as the answer
            with os.fdopen(write, "w") as out:
                out.write(json.dumps(answer_of(json.loads(line))))
            # Not the interpreter's exit: torch's threads make it take seconds, and the
            # child holds nothing that needs it.
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as answer:
            text = answer.read()
        _, status = os.waitpid(pid, 0)
        if not text:
            died = {"type": "DriverChildDied", "message": f"wait status {status}"}
            text = json.dumps({"error": died})
        print(text, flush=True)


if __name__ == "__main__":
    main()
