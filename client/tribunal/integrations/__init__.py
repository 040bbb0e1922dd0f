"""Reward functions for the ecosystem's trainers, backed by the gateway.

- ``tribunal.integrations.trl``: ``remote_reward(...)`` gives async reward functions for
  TRL's ``GRPOTrainer(reward_funcs=[...])``.
- ``tribunal.integrations.verl``: ``compute_score`` (async, verl ≥ 0.9's reward loop),
  ``compute_score_sync`` and ``compute_score_batch`` (older verl) for verl's
  ``reward.custom_reward_function``.
- ``tribunal.integrations.prime_verifiers``: ``tribunal_reward(...)`` gives ``@vf.reward``
  methods for Prime Intellect's ``verifiers`` 0.4 tasks.

OpenRLHF needs no code: its ``--remote_rm_url`` points at the gateway's ``/get_reward``.
"""
