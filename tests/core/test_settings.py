"""Every ``TRIBUNAL_*`` variable of the configuration page's tables (generated from the settings
classes by ``docs/hooks.py``) reaches its setting, and every setting is in those tables.

Each variable is set to a value other than its default, read through the service's settings
class exactly as a process started from that environment would, and compared with the field
it names; a field of a verifier's configuration must also reach the frozen config the
verifier is built from.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import typing
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from tests.conftest import ROOT
from tribunal.citation.settings import CitationSettings
from tribunal.code.settings import CodeSettings
from tribunal.core.settings import CoreSettings
from tribunal.gateway.settings import GatewaySettings
from tribunal.judge.settings import JudgeSettings
from tribunal.math.settings import MathSettings

SERVICES: dict[str, type[CoreSettings]] = {
    "MATH": MathSettings,
    "CODE": CodeSettings,
    "JUDGE": JudgeSettings,
    "CITATION": CitationSettings,
    "GATEWAY": GatewaySettings,
}

SAMPLES: dict[str, str] = {
    "TRIBUNAL_REDIS_URL": "redis://10.0.0.9:6390/2",
    "TRIBUNAL_KEY_PREFIX": "tribunal-test",
    "TRIBUNAL_HOST": "0.0.0.0",
    "TRIBUNAL_API_KEY": "sk-settings-test",
    "TRIBUNAL_MATH_RELATIVE_TOLERANCE": "0.01",
    "TRIBUNAL_LOG_LEVEL": "DEBUG",
    "TRIBUNAL_INSPECT_SAMPLE_RATE": "0.25",
    "TRIBUNAL_MATH_PORT": "18101",
    "TRIBUNAL_CODE_PORT": "18102",
    "TRIBUNAL_JUDGE_PORT": "18103",
    "TRIBUNAL_CODE_BWRAP_PATH": "/opt/bin/bwrap",
    "TRIBUNAL_CODE_PYTHON_PATH": "/opt/bin/python3",
    "TRIBUNAL_CODE_GXX_PATH": "/opt/bin/g++",
    "TRIBUNAL_CODE_PYTHON_PATHS": '["/opt/lib/python3", "/srv/lib"]',
    "TRIBUNAL_JUDGE_BASE_URL": "http://10.0.0.9:8000/v1",
    "TRIBUNAL_JUDGE_MODEL": "/models/judge",
    "TRIBUNAL_JUDGE_API_KEY": "sk-judge-test",
    "TRIBUNAL_JUDGE_DEFAULT_RUBRIC_SETS": '["v3"]',
    "TRIBUNAL_JUDGE_CHAT_TEMPLATE_KWARGS": '{"enable_thinking": true}',
    "TRIBUNAL_JUDGE_DEVICE": "cuda:1",
    "TRIBUNAL_JUDGE_CONTROL_TOKENS": '["[[END]]"]',
    "TRIBUNAL_JUDGE_TOKENIZER_PATH": "/models/judge/tokenizer.json",
    "TRIBUNAL_JUDGE_REQUESTS_PER_MINUTE": "600",
    "TRIBUNAL_JUDGE_TOKENS_PER_MINUTE": "200000",
    "TRIBUNAL_CITATION_REQUESTS_PER_MINUTE": "600",
    "TRIBUNAL_CITATION_TOKENS_PER_MINUTE": "200000",
    "TRIBUNAL_JUDGE_PRICE": '{"prompt": 2.0, "completion": 8.0}',
    "TRIBUNAL_CITATION_PRICE": '{"prompt": 2.0, "completion": 8.0}',
    "TRIBUNAL_CITATION_PORT": "18104",
    "TRIBUNAL_CITATION_F1_WEIGHT": "0.7",
    "TRIBUNAL_CITATION_VALID_ID_WEIGHT": "0.25",
    "TRIBUNAL_CITATION_BASE_URL": "http://10.0.0.9:8000/v1",
    "TRIBUNAL_CITATION_MODEL": "/models/citation",
    "TRIBUNAL_CITATION_NLI_MODEL": "/models/nli",
    "TRIBUNAL_CITATION_API_KEY": "sk-citation-test",
    "TRIBUNAL_CITATION_CHAT_TEMPLATE_KWARGS": '{"enable_thinking": true}',
    "TRIBUNAL_CITATION_DEVICE": "cuda:1",
    "TRIBUNAL_CITATION_CONTROL_TOKENS": '["[[END]]"]',
    "TRIBUNAL_CITATION_TOKENIZER_PATH": "/models/judge/tokenizer.json",
    "TRIBUNAL_GATEWAY_OPENRLHF_END_TOKENS": '["<|custom_end|>"]',
    "TRIBUNAL_CITATION_LEXICAL_FULL": "0.9",
    "TRIBUNAL_CITATION_LEXICAL_PARTIAL": "0.6",
    "TRIBUNAL_CITATION_LEXICAL_RELEVANT": "0.4",
    "TRIBUNAL_GATEWAY_PORT": "18100",
    "TRIBUNAL_GATEWAY_MATH_URL": "http://10.0.0.9:8101",
    "TRIBUNAL_GATEWAY_CODE_URL": "http://10.0.0.9:8102",
    "TRIBUNAL_GATEWAY_JUDGE_URL": "http://10.0.0.9:8103",
    "TRIBUNAL_GATEWAY_CITATION_URL": "http://10.0.0.9:8104",
    "TRIBUNAL_GATEWAY_SPECS_DIR": "/etc/tribunal/specs",
    "TRIBUNAL_GATEWAY_OPENRLHF_SPEC": "tcr_agent",
}
"""Values of the variables whose sample cannot be derived from their default."""


def _hooks() -> Any:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def documented() -> list[str]:
    """The variables of the configuration page's generated tables (``A`` / ``_B`` rows give
    two)."""
    names = []
    for line in _hooks().settings_markdown().splitlines():
        if not line.startswith("| `TRIBUNAL_"):
            continue
        first_cell = line.split("|")[1]
        parts = re.findall(r"`(_?[A-Z0-9_]+)`", first_cell)
        service = re.match(r"TRIBUNAL_([A-Z]+)_", parts[0])
        for part in parts:
            prefix = f"TRIBUNAL_{service.group(1)}" if service else "TRIBUNAL"
            names.append(part if not part.startswith("_") else prefix + part)
    return names


def test_the_committed_configuration_reference_is_fresh() -> None:
    """docs/configuration.md holds the tables as the settings classes give them now (else:
    ``python docs/hooks.py`` rewrites them), angle brackets escaped outside code spans."""
    hooks = _hooks()
    page = hooks.CONFIGURATION_PAGE.read_text()
    assert page == hooks.with_settings(page), "stale: run python docs/hooks.py"
    assert page.count("\n| `TRIBUNAL_") == hooks.settings_markdown().count("\n| `TRIBUNAL_") > 100
    assert "/k/&lt;key&gt;/" in page and "POST /v1/&lt;verifier&gt;/score" in page
    assert "`Authorization: Bearer <key>`" in page  # a code span keeps its brackets


def _split(variable: str) -> tuple[type[CoreSettings], str | None, str]:
    """(settings class, service group or None, field name) that ``variable`` names."""
    rest = variable.removeprefix("TRIBUNAL_")
    service, _, field = rest.partition("_")
    if service in SERVICES:
        return SERVICES[service], service.lower(), field.lower()
    return CoreSettings, None, rest.lower()


def _path(settings: CoreSettings, group: str | None, field: str) -> tuple[str, ...]:
    """Attribute path from ``settings`` to the field that ``group``/``field`` names."""
    if group is None:
        return (field,)
    model = getattr(settings, group)
    if field in type(model).model_fields:
        value = getattr(model, field)
        # A nested group named by the variable itself (TRIBUNAL_JUDGE_BACKEND) sets its kind.
        return (group, field, "kind") if isinstance(value, BaseModel) else (group, field)
    for name in type(model).model_fields:  # a nested group's fields: flat, or prefixed
        sub = getattr(model, name)
        if not isinstance(sub, BaseModel):
            continue
        if field in type(sub).model_fields:
            return (group, name, field)
        if field.removeprefix(f"{name}_") in type(sub).model_fields:
            return (group, name, field.removeprefix(f"{name}_"))
    raise AssertionError(f"no field {field!r} in the {group} settings")


def _get(root: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        root = getattr(root, name)
    return root


def _sample(variable: str, model: BaseModel, field: str) -> str:
    if variable in SAMPLES:
        return SAMPLES[variable]
    info = type(model).model_fields[field]
    choices = [a for a in typing.get_args(info.annotation) if a is not type(None)]
    literal = [v for c in choices for v in typing.get_args(c)] or list(
        typing.get_args(info.annotation)
    )
    default = getattr(model, field)  # the environment holds no TRIBUNAL_* variable
    if literal and all(isinstance(v, str) for v in literal):
        return next(str(v) for v in literal if v != default)
    if isinstance(default, bool):
        return "false" if default else "true"
    if isinstance(default, int | float):
        return str(default + 1)
    raise AssertionError(f"add a sample value of {variable} to SAMPLES")


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):  # a JSON object kept as a model (a price)
        return value.model_dump()
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, tuple) and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return {k: _plain(v) for k, v in value}  # a JSON object kept as sorted pairs
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _expected(sample: str, current: Any) -> Any:
    if isinstance(current, bool):
        return sample == "true"
    if isinstance(current, int | float):
        return type(current)(sample)
    if isinstance(current, list | tuple | dict):
        return json.loads(sample)
    return sample


@pytest.mark.parametrize("variable", documented())
def test_a_documented_variable_reaches_its_setting(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("TRIBUNAL_"):
            monkeypatch.delenv(name)
    settings_cls, group, field = _split(variable)
    path = _path(settings_cls(), group, field)
    defaults = settings_cls()
    before = _plain(_get(defaults, path))
    sample = _sample(variable, _get(defaults, path[:-1]), path[-1])
    monkeypatch.setenv(variable, sample)
    settings = settings_cls()
    value = _plain(_get(settings, path))
    assert value == _expected(sample, value if before is None else before)
    assert value != before, f"{variable}={sample} left the default"
    if group is not None:
        # What the verifier is built from sees it too, when it is part of its config.
        config = getattr(settings, group).config()
        if path[1] in type(config).model_fields:
            assert _plain(_get(config, path[1:])) == value


def _variables(prefix: str, model: type[BaseModel]) -> list[tuple[str, ...]]:
    """The variables of a settings group, each as its accepted spellings: a field; a nested
    group's fields written flat or prefixed with the group's name (a ``kind`` is set
    through the group's own name)."""
    names: list[tuple[str, ...]] = []
    for name, info in model.model_fields.items():
        nested = info.annotation
        if not (isinstance(nested, type) and issubclass(nested, BaseModel)):
            names.append((f"{prefix}_{name}".upper(),))
            continue
        for sub in nested.model_fields:
            if sub == "kind":
                names.append((f"{prefix}_{name}".upper(),))
            else:
                names.append((f"{prefix}_{sub}".upper(), f"{prefix}_{name}_{sub}".upper()))
    return names


@pytest.mark.parametrize("settings_cls", [CoreSettings, *SERVICES.values()])
def test_every_setting_is_documented(settings_cls: type[CoreSettings]) -> None:
    variables: list[tuple[str, ...]] = []
    for name, info in settings_cls.model_fields.items():
        group = info.annotation
        if isinstance(group, type) and issubclass(group, BaseModel):
            variables += _variables(f"TRIBUNAL_{name}", group)
        else:
            variables.append((f"TRIBUNAL_{name}".upper(),))
    names = set(documented())
    assert [v[0] for v in variables if not names.intersection(v)] == []


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"TRIBUNAL_LOG_LEVEL": "verbose"}, "unknown log level 'verbose'; known: DEBUG, INFO"),
        (
            {"TRIBUNAL_WORKER_HEARTBEAT_S": "20"},
            r"worker_heartbeat_s \(20.0\) must be shorter than visibility_timeout_s \(15.0\)",
        ),
        (
            {"TRIBUNAL_VISIBILITY_TIMEOUT_S": "2", "TRIBUNAL_WORKER_HEARTBEAT_S": "2"},
            "must be shorter than visibility_timeout_s",
        ),
    ],
)
def test_contradictions_and_unknown_values_are_refused(
    environment: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("TRIBUNAL_"):
            monkeypatch.delenv(name)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    for settings_cls in (CoreSettings, *SERVICES.values()):
        with pytest.raises(ValueError, match=message):
            settings_cls()


def test_a_log_level_in_any_case_is_one_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUNAL_LOG_LEVEL", "debug")
    assert CoreSettings().log_level == "DEBUG"
