"""``BackendConfig``: which LLM answers and how it is called (kind, model, server, retries).

A frozen pydantic model, hashable, defaults and descriptions written here only: the service
that owns a backend nests it in its settings (the judge reads it from ``TRIBUNAL_JUDGE_*``).
:meth:`BackendConfig.hash_payload` lists what can move an answer, for the caller's
``config_hash``; secrets and capacity knobs are left out.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

BackendKind = Literal["openai", "transformers", "none"]
"""Which backend answers: any OpenAI-compatible server, an in-process transformers model, or
``none`` (not configured: every call fails with ``backend_unavailable``)."""

DEFAULT_OPENAI_MODEL = "Qwen/Qwen3.5-35B-A3B"
"""What an openai backend serves when no model is named: the judge model of the compose stack."""

StructuredOutput = Literal["json_schema", "json_object", "none"]
"""How the openai backend constrains the answer: a JSON schema (``response_format`` of type
``json_schema``, guided decoding on vLLM / SGLang), JSON mode only, or nothing (prompt only)."""


class TokenPrice(BaseModel):
    """A model's price, USD per million tokens (frozen, hashable; both kinds required, so
    that a cost never silently leaves the completions out)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt: float = Field(ge=0, description="USD per million prompt tokens.")
    completion: float = Field(ge=0, description="USD per million completion tokens.")


class BackendConfig(BaseModel):
    """Which model answers and how calls to it are made (frozen, hashable)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: BackendKind = Field(
        default="none",
        description="openai (any OpenAI-compatible chat-completions server), transformers (an "
        "in-process Hugging Face model, CPU) or none (every call fails: backend_unavailable).",
    )
    model: str = Field(
        default="", description="Served model name (openai) or local path / hub id (transformers)."
    )
    base_url: str | None = Field(
        default=None,
        description="Server root including /v1 (openai), e.g. http://vllm:8000/v1.",
    )
    api_key: str | None = Field(
        default=None,
        repr=False,
        description="Bearer token of the server, or None. Never hashed, never logged.",
    )
    max_concurrency: int = Field(
        default=64,
        ge=1,
        description="Most calls in flight to this backend at once (a semaphore in front of the "
        "HTTP client; queued calls wait in the semaphore, never in the connection pool).",
    )
    requests_per_minute: int | None = Field(
        default=None,
        ge=1,
        description="Most HTTP requests (retries included) sent to this server and model in "
        "any 60 s, or null (no limit). Calls past it wait for room, never fail. Shared by "
        "every worker and service on the same Redis (per process with the memory queue).",
    )
    tokens_per_minute: int | None = Field(
        default=None,
        ge=1,
        description="Most tokens (prompt + completion) sent to this server and model in any "
        "60 s, or null. A call counts ceil(prompt chars / 4) + its max_tokens until the "
        "server reports its usage. Waited for and shared as requests_per_minute.",
    )
    price: TokenPrice | None = Field(
        default=None,
        description='This model\'s price in USD per million tokens, {"prompt": 2.0, '
        '"completion": 8.0} (both required; 0 for free tokens), or null (not priced: tokens '
        "are counted, no cost). The cost of calls and of each judged item is in /metrics.",
    )
    timeout_s: float = Field(default=60.0, gt=0, description="Deadline of one HTTP attempt (s).")
    max_retries: int = Field(
        default=3,
        ge=0,
        description="Extra attempts after a retryable failure (429, 5xx, timeout, connection "
        "error); other 4xx are never retried.",
    )
    backoff_s: float = Field(
        default=0.5,
        ge=0,
        description="First backoff (s); doubles per attempt, with jitter, capped by "
        "backoff_max_s. A Retry-After header from the server wins when it is longer.",
    )
    backoff_max_s: float = Field(default=8.0, ge=0, description="Longest single backoff (s).")
    structured_output: StructuredOutput = Field(
        default="json_schema", description="json_schema | json_object | none (StructuredOutput)."
    )
    logprobs: bool = Field(
        default=True, description="Ask for the log-probabilities of the verdict token."
    )
    top_logprobs: int = Field(
        default=5,
        ge=1,
        le=20,
        description="Alternatives per token to ask for (a caller with k verdict levels needs at "
        "least k).",
    )
    temperature: float = Field(
        default=0.0, ge=0, description="Sampling temperature of the verdict call (0 = greedy)."
    )
    seed: int | None = Field(
        default=0, description="Sampling seed sent with each call (vLLM honours it), or null."
    )
    chat_template_kwargs: tuple[tuple[str, Any], ...] = Field(
        default=(("enable_thinking", False),),
        description="Sent as chat_template_kwargs (vLLM / SGLang extension; a JSON object, e.g. "
        '{"enable_thinking": false} for Qwen3 judges); {}: not sent (hosted APIs).',
    )
    control_tokens: tuple[str, ...] = Field(
        default=(),
        description="Control tokens of the served model's chat template beyond the common "
        "families' (ChatML, Llama 3, Gemma, Mistral, Qwen3 <think>, DeepSeek ...): broken in "
        "every untrusted text of a prompt so that they cannot tokenize as special tokens. "
        "The transformers backend adds its tokenizer's own; an openai backend cannot see the "
        "server's tokenizer: point tokenizer_path at its files, or name any unusual ones here "
        "(a JSON list).",
    )
    tokenizer_path: str | None = Field(
        default=None,
        description="The served model's tokenizer.json or tokenizer_config.json (or the "
        "directory holding them, as the server loaded it): an openai backend reads its added "
        "and special tokens at start and breaks them too. Unset: a start-up warning names the "
        "model's family and whether the built-in families cover it.",
    )
    device: str = Field(default="cpu", description="Torch device of the transformers backend.")

    @field_validator("control_tokens", mode="before")
    @classmethod
    def _list_to_tuple(cls, value: Any) -> Any:
        """Accept a JSON list (the environment's form)."""
        if isinstance(value, str):
            value = json.loads(value)
        return tuple(value) if isinstance(value, list) else value

    @field_validator("chat_template_kwargs", mode="before")
    @classmethod
    def _object_to_pairs(cls, value: Any) -> Any:
        """Accept a JSON object (the environment's form) and keep it as sorted pairs, so that
        the config stays hashable."""
        if isinstance(value, str):  # a flat environment variable that no one decoded
            value = json.loads(value)
        return tuple(sorted(value.items())) if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _limits_need_a_server(self) -> BackendConfig:
        """Refuse per-minute limits on an in-process model, which sends no request to a
        server (on ``none`` every call fails at once: nothing to limit, nothing lost)."""
        if self.kind == "transformers":
            for name in ("requests_per_minute", "tokens_per_minute"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"{name} limits calls to an OpenAI-compatible server; the {self.kind} "
                        "backend makes none (unset it, or use the openai backend)"
                    )
        return self

    @field_validator("price", mode="before")
    @classmethod
    def _price_from_json(cls, value: Any) -> Any:
        """Accept a JSON object (the environment's form)."""
        return json.loads(value) if isinstance(value, str) else value

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """What the tokens cost at this model's price (USD), or None when it is not priced."""
        if self.price is None:
            return None
        return (prompt_tokens * self.price.prompt + completion_tokens * self.price.completion) / 1e6

    def hash_payload(self) -> dict[str, Any]:
        """Return the fields that can move a verdict (no secrets, no capacity knobs)."""
        return {
            "kind": self.kind,
            "model": self.model,
            "structured_output": self.structured_output,
            "logprobs": self.logprobs,
            "temperature": self.temperature,
            "seed": self.seed,
            "chat_template_kwargs": dict(self.chat_template_kwargs),
            "control_tokens": sorted(set(self.control_tokens)),
            "tokenizer_path": self.tokenizer_path,
        }


def gather_backend(data: dict[str, Any]) -> dict[str, Any]:
    """Take a service's backend group out of its flat settings ``data`` (changed in place).

    A service reads its backend from flat variables (``TRIBUNAL_JUDGE_BASE_URL``, not
    ``..._BACKEND_BASE_URL``) and ``TRIBUNAL_<SERVICE>_BACKEND`` names the backend's kind. The
    group is ``data["backend"]`` (a ``BackendConfig``, a dict of its fields, a kind, or absent)
    with every ``BackendConfig`` field found flat in ``data`` moved into it. An unset kind is
    ``openai`` when a base URL is given, else ``none``; an openai backend without a model
    serves :data:`DEFAULT_OPENAI_MODEL`.

    Returns:
        The group's fields, for ``BackendConfig`` to validate.
    """
    given = data.pop("backend", None)
    if isinstance(given, BackendConfig):
        group = {name: getattr(given, name) for name in BackendConfig.model_fields}
    elif isinstance(given, dict):
        group = dict(given)
    else:
        group = {} if given is None else {"kind": given}
    for name in BackendConfig.model_fields:
        if name in data:
            group[name] = data.pop(name)
    if group.get("kind") is None:
        group["kind"] = "openai" if group.get("base_url") else "none"
    if group["kind"] == "openai" and not group.get("model"):
        group["model"] = DEFAULT_OPENAI_MODEL
    return group
