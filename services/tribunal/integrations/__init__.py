"""Reward functions for the ecosystem's trainers, backed by the gateway.

- ``tribunal.integrations.trl``: ``remote_reward(...)`` gives async reward functions for
  TRL's ``GRPOTrainer(reward_funcs=[...])``.
- ``tribunal.integrations.verl``: ``compute_score`` and ``compute_score_batch`` for verl's
  ``custom_reward_function.path``.

OpenRLHF needs no code: its ``--remote_rm_url`` points at the gateway's ``/get_reward``.
"""
