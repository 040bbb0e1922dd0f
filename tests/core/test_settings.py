"""Every ``TRIBUNAL_*`` variable of the README's configuration table reaches its setting, and
every setting of the core, math and code services is in that table.

Each variable is set to a value other than its default, read through the service's settings
class exactly as a process started from that environment would, and compared with the field
it names; a field of a verifier's configuration must also reach the frozen config the
verifier is built from.
"""

from __future__ import annotations

import json
import re
import typing
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from tests.conftest import ROOT
from tribunal.code.settings import CodeSettings
from tribunal.core.settings import CoreSettings
from tribunal.judge.settings import JudgeSettings
from tribunal.math.settings import MathSettings

SERVICES: dict[str, type[CoreSettings]] = {
    "MATH": MathSettings,
    "CODE": CodeSettings,
    "JUDGE": JudgeSettings,
}

SAMPLES: dict[str, str] = {
    "TRIBUNAL_REDIS_URL": "redis://10.0.0.9:6390/2",
    "TRIBUNAL_KEY_PREFIX": "tribunal-test",
    "TRIBUNAL_HOST": "0.0.0.0",
    "TRIBUNAL_API_KEY": "sk-settings-test",
    "TRIBUNAL_LOG_LEVEL": "DEBUG",
    "TRIBUNAL_MATH_PORT": "18101",
    "TRIBUNAL_CODE_PORT": "18102",
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
}
"""Values of the variables whose sample cannot be derived from their default."""


def documented() -> list[str]:
    """The variables of the README's configuration table (``A`` / ``_B`` rows give two)."""
    names = []
    for line in (ROOT / "README.md").read_text().splitlines():
        if not line.startswith("| `TRIBUNAL_"):
            continue
        first_cell = line.split("|")[1]
        parts = re.findall(r"`(_?[A-Z0-9_]+)`", first_cell)
        service = re.match(r"TRIBUNAL_([A-Z]+)_", parts[0])
        for part in parts:
            prefix = f"TRIBUNAL_{service.group(1)}" if service else "TRIBUNAL"
            names.append(part if not part.startswith("_") else prefix + part)
    return names


def _split(variable: str) -> tuple[type[CoreSettings], str | None, str]:
    """(settings class, service group or None, field name) that ``variable`` names."""
    rest = variable.removeprefix("TRIBUNAL_")
    service, _, field = rest.partition("_")
    if service in SERVICES:
        return SERVICES[service], service.lower(), field.lower()
    return CoreSettings, None, rest.lower()


def _owner(settings: CoreSettings, group: str | None, field: str) -> tuple[BaseModel, str]:
    """The model that holds the field, and the field's name in it."""
    if group is None:
        return settings, field
    model = getattr(settings, group, None)
    if not isinstance(model, BaseModel):  # a service whose settings are still flat
        return settings, f"{group}_{field}"
    if field in type(model).model_fields:
        return model, field
    for name in type(model).model_fields:  # one level of nesting (the judge's backend)
        sub = getattr(model, name)
        if isinstance(sub, BaseModel) and field in type(sub).model_fields:
            return sub, field
    raise AssertionError(f"no field {field!r} in the {group} settings")


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
    if isinstance(value, SecretStr):
        return value.get_secret_value()
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
    import os

    for name in list(os.environ):
        if name.startswith("TRIBUNAL_"):
            monkeypatch.delenv(name)
    settings_cls, group, field = _split(variable)
    model, name = _owner(settings_cls(), group, field)
    before = getattr(model, name)
    sample = _sample(variable, model, name)
    monkeypatch.setenv(variable, sample)
    settings = settings_cls()
    model, name = _owner(settings, group, field)
    value = _plain(getattr(model, name))
    if isinstance(before, dict) and not isinstance(value, dict):
        value = dict(value)
    assert value == _expected(sample, value if before is None else _plain(before))
    assert value != _plain(before), f"{variable}={sample} left the default"
    service_group = getattr(settings, group, None) if group else None
    derive = getattr(service_group, "config", None)
    if derive is not None and name in type(derive()).model_fields:
        assert _plain(getattr(derive(), name)) == value, "the verifier's config must see it"


@pytest.mark.parametrize("settings_cls", [CoreSettings, MathSettings, CodeSettings])
def test_every_setting_is_documented(settings_cls: type[CoreSettings]) -> None:
    names = set(documented())
    fields: list[str] = []
    for name, info in settings_cls.model_fields.items():
        group = info.annotation
        if isinstance(group, type) and issubclass(group, BaseModel):
            fields += [f"TRIBUNAL_{name}_{sub}".upper() for sub in group.model_fields]
        else:
            fields.append(f"TRIBUNAL_{name}".upper())
    assert sorted(set(fields) - names) == []
