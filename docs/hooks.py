"""MkDocs hook: the configuration page's tables, generated from the settings classes.

A page that holds the line ``<!-- tribunal:settings -->`` gets, in its place, one table per
service: every ``TRIBUNAL_*`` variable its settings class reads, its default and its
description (the ``Field(description=...)`` written once beside the field). A field of a
nested group (the judge's ``backend``) is written flat, ``TRIBUNAL_JUDGE_BASE_URL``, as the
settings classes read it; the group's ``kind`` is set through the group's own name
(``TRIBUNAL_JUDGE_BACKEND``). ``tests/core/test_settings.py`` sets every
variable of these tables and checks that it reaches its field.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

MARKER = "<!-- tribunal:settings -->"
PREFIXED_GROUPS = {"lexical"}
"""Groups whose fields keep the group's name in their variables (the citation scorer's
``TRIBUNAL_CITATION_LEXICAL_FULL``); the others' are written flat."""


def _services() -> list[tuple[str, str, type[BaseModel]]]:
    """(heading, variable prefix, settings class) of every service, core first."""
    from tribunal.citation.settings import CitationSettings
    from tribunal.code.settings import CodeSettings
    from tribunal.core.settings import CoreSettings
    from tribunal.gateway.settings import GatewaySettings
    from tribunal.judge.settings import JudgeSettings
    from tribunal.math.settings import MathSettings

    return [
        ("Every service", "TRIBUNAL", CoreSettings),
        ("math", "TRIBUNAL", MathSettings),
        ("code", "TRIBUNAL", CodeSettings),
        ("judge", "TRIBUNAL", JudgeSettings),
        ("citation", "TRIBUNAL", CitationSettings),
        ("gateway", "TRIBUNAL", GatewaySettings),
    ]


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return "computed"
    value = info.default
    if value is PydanticUndefined or value is None or isinstance(value, SecretStr):
        return "unset"
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str) and not value:
        return '`""`'
    return f"`{value}`"


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def _rows(prefix: str, model: type[BaseModel], skip: set[str]) -> list[str]:
    rows = []
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        nested = info.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel):
            rows += _group_rows(f"{prefix}_{name}".upper(), name, nested)
            continue
        variable = f"{prefix}_{name}".upper()
        rows.append(f"| `{variable}` | {_default(info)} | {_cell(info.description)} |")
    return rows


def _group_rows(prefix: str, group: str, model: type[BaseModel]) -> list[str]:
    """A service's group (``math``: ``TRIBUNAL_MATH_*``); a group inside it is flattened."""
    rows = []
    for name, info in model.model_fields.items():
        nested = info.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel):
            for sub, sub_info in nested.model_fields.items():
                if sub == "kind":
                    variable = f"{prefix}_{name}".upper()
                elif name in PREFIXED_GROUPS:
                    variable = f"{prefix}_{name}_{sub}".upper()
                else:
                    variable = f"{prefix}_{sub}".upper()
                rows.append(
                    f"| `{variable}` | {_default(sub_info)} | {_cell(sub_info.description)} |"
                )
            continue
        variable = f"{prefix}_{name}".upper()
        rows.append(f"| `{variable}` | {_default(info)} | {_cell(info.description)} |")
    return rows


def settings_markdown() -> str:
    """The tables of every service's settings, as Markdown (core's first, then each
    service's own variables)."""
    from tribunal.core.settings import CoreSettings

    core = set(CoreSettings.model_fields)
    parts = []
    for heading, prefix, cls in _services():
        skip = set() if cls is CoreSettings else core
        rows = _rows(prefix, cls, skip)
        parts.append(
            f"### {heading}\n\n| variable | default | meaning |\n| --- | --- | --- |\n"
            + "\n".join(rows)
        )
    return "\n\n".join(parts)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs' hook: put the generated tables where the marker stands."""
    if MARKER in markdown:
        return markdown.replace(MARKER, settings_markdown())
    return markdown
