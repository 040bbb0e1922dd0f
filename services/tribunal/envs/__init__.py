"""Environments: multi-turn episodes over Tribunal's verifiers, defined once and served over the
environment protocols trainers speak (the Open Reward Standard: :mod:`tribunal.envs.ors`).

An environment (:mod:`tribunal.envs.environments`) is a set of task splits read from the data
directory (:mod:`tribunal.envs.tasks`), a prompt per task and tools; the episode's reward comes
from a verifier called over HTTP with :mod:`tribunal.client`, never from this package's own
reading of the agent's text. A verifier's failure is an :class:`EpisodeError` that each
protocol answers in its own error form, never a reward of 0.
"""

from tribunal.envs.environments import (
    ENVIRONMENTS,
    ContentRefused,
    EpisodeError,
    Step,
    ToolInputError,
    Verifiers,
)

__all__ = ["ENVIRONMENTS", "ContentRefused", "EpisodeError", "Step", "ToolInputError", "Verifiers"]
