"""The trainer's one configuration: a dataclass mapped from YAML, checked at construction.

Defaults follow the papers (cited on each field); a YAML file sets any of them. Fields are
documented once, by the attribute docstring under each field.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import yaml

from tribunal.testing.tiny_model import TinyModelConfig
from tribunal.trainer.advantages import AdvantageEstimator, StdScaling
from tribunal.trainer.losses import Aggregation, KLEstimator

FailurePolicy = Literal["drop_group", "retry", "stop"]


def refuse_unknown_choices(config: Any) -> None:
    """Refuse a value outside its field's ``Literal`` choices, naming the field.

    Each field of the dataclass ``config`` typed ``Literal[...]`` (or ``Literal[...] | None``)
    must hold one of the listed values: an unknown option is refused, never replaced by a
    default at run time.

    Raises:
        ValueError: ``<field>: unknown value <v>; known: [...]``.
    """
    hints = get_type_hints(type(config))
    for item in dataclasses.fields(config):
        choices = _literal_choices(hints[item.name])
        value = getattr(config, item.name)
        # Same type too: True == 1 would pass as Literal[0, 1]'s 1, and 1.0 as well.
        if choices is not None and not any(
            type(value) is type(choice) and value == choice for choice in choices
        ):
            raise ValueError(f"{item.name}: unknown value {value!r}; known: {list(choices)}")


def _literal_choices(hint: Any) -> tuple[Any, ...] | None:
    """The values a ``Literal`` (or an optional ``Literal``) admits; None for other types."""
    if get_origin(hint) is Literal:
        return get_args(hint)
    args = get_args(hint)
    literals = [arg for arg in args if get_origin(arg) is Literal]
    if literals and all(get_origin(a) is Literal or a is type(None) for a in args):
        return tuple(v for lit in literals for v in get_args(lit)) + (
            (None,) if type(None) in args else ()
        )
    return None


@dataclass(frozen=True)
class RewardSourceConfig:
    """One reward service reached over HTTP (its jobs API, ``POST /v1/jobs``)."""

    name: str
    """Name of the component in the metrics (``reward/<name>/mean``)."""
    url: str
    """Base URL of the service, e.g. ``http://127.0.0.1:8101``."""
    verifier: str
    """Verifier that scores the items (``math``, ``code``, ``judge`` ...)."""
    weight: float = 1.0
    """Weight of this component in the reward (reward = Σ weight · component)."""
    timeout_s: float = 120.0
    """Longest wait for one group's results before the failure policy applies."""
    retries: int = 2
    """Resubmissions of a failed group when ``on_reward_failure`` is ``retry``."""
    retry_backoff_s: float = 2.0
    """Wait before the first resubmission, doubled before each next one: a service that
    restarts (a few seconds) is waited out, not met three times within a second."""
    fields: dict[str, str] = field(default_factory=dict)
    """Item field -> dataset column, e.g. ``{ground_truth: answer}``; ``response`` is the
    completion and always set."""
    item_options: dict[str, Any] = field(default_factory=dict)
    """Constant fields added to every item (e.g. ``{language: python}``)."""

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"reward source {self.name!r}: url must start with http(s)://")
        if self.timeout_s <= 0 or self.retries < 0 or self.retry_backoff_s < 0:
            raise ValueError(
                f"reward source {self.name!r}: timeout_s > 0, retries >= 0 and retry_backoff_s >= 0"
            )


@dataclass(frozen=True)
class ToolConfig:
    """The multi-turn ``code_interpreter`` tool (Hermes ``<tool_call>`` format)."""

    code_url: str
    """Base URL of the code service whose ``/v1/code/run`` runs the calls."""
    max_turns: int = 16
    """Most assistant turns per rollout (GRPO-TCR: 16)."""
    max_tool_output_chars: int = 2000
    """Tool output beyond this is cut (it still costs context)."""
    timeout_s: float = 30.0
    """HTTP timeout of one tool call."""
    tool_call_reward: bool = False
    """GRPO-TCR's reward shaping of wrong answers that used tools (see ``tool_call_reward``)."""


_VARIABLE = re.compile(r"\$\{(\w+)(?::-([^${}]*))?\}")
"""``${NAME}`` or ``${NAME:-default}`` whose default holds no further variable."""


def expand_variables(value: Any, env: Mapping[str, str], where: str = "config") -> Any:
    """``value`` (a loaded YAML document) with ``${NAME}`` and ``${NAME:-default}`` in its
    strings replaced from ``env``, as Compose interpolates (a default applies when the
    variable is unset or empty; a default may itself name a variable:
    ``${TRIBUNAL_GATEWAY_URL:-http://127.0.0.1:${TRIBUNAL_GATEWAY_PORT:-8100}}``).

    Raises:
        ValueError: A variable without a default is unset (the message names it and
            ``where``).
    """
    if isinstance(value, dict):
        return {k: expand_variables(v, env, where) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_variables(v, env, where) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = env.get(name, "")
        if found or default is not None:
            return found or default or ""
        raise ValueError(f"{where}: ${{{name}}} is unset and has no default")

    text = value
    while True:  # innermost first: a default's own variable is replaced before it is used
        expanded = _VARIABLE.sub(substitute, text)
        if expanded == text:
            return expanded
        text = expanded


@dataclass(frozen=True)
class GRPOConfig:
    """Everything one training run needs. Load with :meth:`from_yaml`."""

    # > Model
    model: str | None = None
    """A local Hugging Face model directory; or None with ``tiny_model`` set."""
    tiny_model: TinyModelConfig | None = None
    """Build a random tiny Qwen3 instead of loading ``model``."""
    bf16: bool = False
    """Train in bfloat16 (ZeRO-3's ``bf16.enabled``)."""

    # > Data
    dataset: str = ""
    """Local JSONL or Parquet file, read with Hugging Face ``datasets``."""
    prompt_field: str = "question"
    """Column holding the prompt text."""
    system_prompt: str | None = None
    """System message of the chat template, if any."""
    max_prompts: int | None = None
    """Use only the first N rows (smoke runs)."""

    # > Batching (GRPO, arXiv 2402.03300)
    prompts_per_step: int = 32
    """Prompts (groups) per optimizer step, over all ranks."""
    group_size: int = 8
    """Completions per prompt (G; TRL's ``num_generations``)."""
    max_steps: int = 100
    """Optimizer steps."""
    seed: int = 42
    """Seed of data order, initialisation and sampling."""

    # > Generation
    temperature: float = 1.0
    """Sampling temperature (1.0: sample from the policy itself)."""
    top_p: float = 1.0
    """Nucleus sampling."""
    max_prompt_tokens: int = 1024
    """Prompts are cut on the left to this many tokens."""
    max_response_tokens: int = 512
    """Budget of generated tokens per completion (all turns together)."""
    rollout_backend: Literal["hf", "vllm"] = "hf"
    """``hf``: Hugging Face ``generate`` in-process (CPU or GPU); ``vllm``: a vLLM engine."""
    async_steps: Literal[0, 1] = 0
    """1: generate step t+1 while step t is scored and trained (off-policy by one step)."""

    # > Algorithm
    advantage_estimator: AdvantageEstimator = "grpo"
    """``grpo`` (group mean/std), ``rloo`` (leave-one-out, arXiv 2402.14740), ``dr_grpo``
    (no std, arXiv 2503.20783)."""
    std_scaling: StdScaling = "group"
    """GRPO's std: ``group``, ``batch`` or ``none``."""
    epsilon_low: float = 0.2
    """Lower clip range (PPO, arXiv 1707.06347)."""
    epsilon_high: float = 0.2
    """Upper clip range (DAPO clip-higher uses 0.28, arXiv 2503.14476)."""
    dual_clip: float | None = None
    """Dual-clip constant c > 1 (arXiv 1912.09729), or None."""
    loss_aggregation: Aggregation = "token_mean"
    """``token_mean`` (DAPO), ``seq_mean_token_mean`` (GRPO), ``constant`` (Dr. GRPO)."""
    beta: float = 0.0
    """KL coefficient; > 0 loads a frozen reference model (GRPO uses 0.04)."""
    kl_estimator: KLEstimator = "k3"
    """KL estimator (Schulman 2020): k1, k2 or k3."""
    overlong_buffer_tokens: int = 0
    """DAPO overlong punishment ramp length (0: off)."""
    overlong_penalty_factor: float = 1.0
    """DAPO overlong punishment at the budget."""
    mask_truncated_completions: bool = False
    """Drop completions that hit ``max_response_tokens`` from the loss (DAPO §3.4)."""
    skip_zero_variance_groups: bool = False
    """Leave groups whose rewards are all equal out of the loss (DAPO §3.2)."""

    # > Optimisation
    learning_rate: float = 1e-6
    """AdamW learning rate, constant (torch AdamW: no DeepSpeed JIT op on CPU)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    gradient_clipping: float = 1.0
    """Global grad-norm clip."""

    # > Rewards
    reward_sources: tuple[RewardSourceConfig, ...] = ()
    """Services without a gateway: each scores every completion; reward = Σ weight · reward."""
    gateway_url: str | None = None
    """The gateway's base URL, used with ``reward_spec``."""
    reward_spec: str | None = None
    """A reward spec on the gateway (e.g. ``refiner_rubric_citation``)."""
    reward_spec_fields: dict[str, str] = field(default_factory=dict)
    """Item field -> dataset column for the gateway's items."""
    on_reward_failure: FailurePolicy = "drop_group"
    """A group whose scoring failed (timeout, service down, item error): ``drop_group`` from
    the loss, ``retry`` it (then drop), or ``stop`` the run. Never a silent 0."""

    # > Tools
    tools: ToolConfig | None = None
    """Multi-turn code interpreter (tcr_agent); None: single-turn."""

    # > Output
    save_every: int = 0
    """Checkpoint every N steps (0: only at the end)."""
    log_every: int = 1
    """Console line every N steps (metrics.jsonl gets every step)."""

    def __post_init__(self) -> None:
        refuse_unknown_choices(self)
        self._check_model_and_data()
        self._check_algorithm()
        self._check_rewards()

    def _check_model_and_data(self) -> None:
        if (self.model is None) == (self.tiny_model is None):
            raise ValueError("set exactly one of model (a local directory) and tiny_model")
        if not self.dataset:
            raise ValueError("dataset: give a local .jsonl or .parquet file")
        if self.group_size < 2:
            raise ValueError("group_size must be >= 2: a group baseline needs two completions")
        if self.prompts_per_step < 1 or self.max_steps < 1:
            raise ValueError("prompts_per_step and max_steps must be >= 1")
        if self.max_response_tokens < 1 or self.max_prompt_tokens < 1:
            raise ValueError("max_prompt_tokens and max_response_tokens must be >= 1")

    def _check_algorithm(self) -> None:
        if self.epsilon_low < 0 or self.epsilon_high < 0:
            raise ValueError("epsilon_low and epsilon_high must be >= 0")
        if self.dual_clip is not None and self.dual_clip <= 1:
            raise ValueError("dual_clip must be > 1 (arXiv 1912.09729 uses 3) or null")
        if self.beta < 0:
            raise ValueError("beta must be >= 0 (0 disables the KL term)")
        if self.overlong_buffer_tokens >= self.max_response_tokens:
            raise ValueError(
                "overlong_buffer_tokens must be below max_response_tokens "
                f"({self.overlong_buffer_tokens} >= {self.max_response_tokens})"
            )
        if self.temperature <= 0:
            raise ValueError("temperature must be > 0 (RL needs sampling)")

    def _check_rewards(self) -> None:
        has_gateway = self.gateway_url is not None or self.reward_spec is not None
        if has_gateway and (self.gateway_url is None or self.reward_spec is None):
            raise ValueError("the gateway form needs both gateway_url and reward_spec")
        if has_gateway == bool(self.reward_sources):
            raise ValueError(
                "give either reward_sources (a list of services) or gateway_url + reward_spec"
            )
        names = [source.name for source in self.reward_sources]
        if len(set(names)) != len(names):
            raise ValueError(f"reward_sources: names must be unique, got {names}")

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> GRPOConfig:
        """Build from a mapping (YAML), refusing unknown keys by name."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"unknown config keys {unknown}; known keys: {sorted(known)}")
        values = dict(raw)
        if values.get("tiny_model") is not None:
            values["tiny_model"] = TinyModelConfig(**values["tiny_model"])
        if values.get("tools") is not None:
            values["tools"] = ToolConfig(**values["tools"])
        values["reward_sources"] = tuple(
            RewardSourceConfig(**source) for source in values.get("reward_sources") or ()
        )
        return cls(**values)

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: dict[str, Any] | None = None) -> GRPOConfig:
        """Read a YAML config; ``overrides`` replace top-level keys (tests, CLI).

        A relative ``dataset`` path is found next to the config file when a file of that name
        is there, else taken relative to the current directory. Every string value may name
        environment variables as Compose does (:func:`expand_variables`), so that a shipped
        config follows the stack's port settings (``${TRIBUNAL_MATH_PORT:-8101}``).

        Raises:
            ValueError: The file is not a mapping, a variable it names without a default is
                unset, or a field is invalid.
        """
        raw = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: the config must be a mapping")
        raw = expand_variables(raw, os.environ, where=str(path))
        raw.update(overrides or {})
        beside = Path(path).parent / str(raw.get("dataset", ""))
        if raw.get("dataset") and not Path(raw["dataset"]).is_absolute() and beside.is_file():
            raw["dataset"] = str(beside)
        return cls.from_dict(raw)
