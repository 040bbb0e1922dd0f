"""MkDocs hook: tables generated from the settings classes and from the benchmarks' results.

``docs/configuration.md`` holds, between the lines ``<!-- tribunal:settings -->`` and
``<!-- /tribunal:settings -->``, one table per service: every ``TRIBUNAL_*`` variable its
settings class reads, its default and its description (the ``Field(description=...)`` written
once beside the field). The tables are committed, so that the page reads complete where people
read it (the repository), and generated: ``python docs/hooks.py`` writes them,
``python docs/hooks.py --check`` exits 1 when they are stale (``tests/core/test_settings.py``
runs the check), and the built site takes them fresh from the settings classes. Angle
brackets outside code spans are escaped (``/k/&lt;key&gt;/``): Markdown would read ``<key>``
as an HTML tag and drop it. A field of a
nested group (the judge's ``backend``) is written flat, ``TRIBUNAL_JUDGE_BASE_URL``, as the
settings classes read it; the group's ``kind`` is set through the group's own name
(``TRIBUNAL_JUDGE_BACKEND``). ``tests/core/test_settings.py`` sets every
variable of these tables and checks that it reaches its field.

A page that holds the line ``<!-- tribunal:bench NAME -->`` gets, in its place, the tables of
``bench/results/NAME.json`` (written by the benchmark, ``bench/results.py``), each followed
by the command that produced it, the date and the machine. A missing or malformed result
fails the build.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

MARKER = "<!-- tribunal:settings -->"
END_MARKER = "<!-- /tribunal:settings -->"
CONFIGURATION_PAGE = Path(__file__).resolve().parent / "configuration.md"
_SETTINGS_BLOCK = re.compile(re.escape(MARKER) + r"\n.*?" + re.escape(END_MARKER), re.S)
BENCH_MARKER = re.compile(r"<!-- tribunal:bench ([a-z0-9_]+) -->")
BENCH_RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"
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


def _text(text: str | None) -> str:
    """A description as one table cell: ``_cell``, with ``<`` and ``>`` outside code spans
    escaped (Markdown takes ``<key>`` for an HTML tag and drops it)."""
    parts = _cell(text).split("`")
    for i in range(0, len(parts), 2):  # the even parts lie outside code spans
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


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
        rows.append(f"| `{variable}` | {_default(info)} | {_text(info.description)} |")
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
                    f"| `{variable}` | {_default(sub_info)} | {_text(sub_info.description)} |"
                )
            continue
        variable = f"{prefix}_{name}".upper()
        rows.append(f"| `{variable}` | {_default(info)} | {_text(info.description)} |")
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


def _machine(machine: dict[str, Any]) -> str:
    load = machine.get("load_avg_1m")
    return (
        f"{machine['cpu']}, {machine['cores']} cores, {machine['system']}, "
        f"Python {machine['python']}" + ("" if load is None else f", load average {load}")
    )


def bench_markdown(name: str, results: Path = BENCH_RESULTS) -> str:
    """The tables of ``results/<name>.json`` as Markdown, each with its command, date and
    machine.

    Raises:
        FileNotFoundError: No result of that name.
        KeyError, ValueError: The file is not a result as ``bench/results.py`` writes it.
    """
    result = json.loads((results / f"{name}.json").read_text())
    source = f"`{result['command']}`, {result['date']} ({_machine(result['machine'])})"
    if result.get("note"):
        source += f"; {result['note']}"
    parts = []
    for table in result["tables"]:
        columns = table["columns"]
        lines = [
            "| " + " | ".join(_cell(c) for c in columns) + " |",
            "| " + " | ".join("---" for _ in columns) + " |",
        ]
        for row in table["rows"]:
            if len(row) != len(columns):
                raise ValueError(f"{name}: row {row} does not match columns {columns}")
            lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
        title = f"**{table['title']}**\n\n" if table.get("title") else ""
        parts.append(title + "\n".join(lines) + f"\n\nMeasured by {source}.")
    return "\n\n".join(parts)


def with_settings(page: str, markers: bool = True) -> str:
    """``page`` with its settings block (between :data:`MARKER` and :data:`END_MARKER`)
    generated afresh; ``markers=False`` leaves the marker lines out (the built page).

    Raises:
        ValueError: The page has no settings block.
    """
    if not _SETTINGS_BLOCK.search(page):
        raise ValueError(f"no {MARKER} ... {END_MARKER} block")
    block = f"{MARKER}\n\n{settings_markdown()}\n\n{END_MARKER}" if markers else settings_markdown()
    return _SETTINGS_BLOCK.sub(lambda _: block, page)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs' hook: put the generated tables where the markers stand."""
    if MARKER in markdown:
        markdown = with_settings(markdown, markers=False)
    return BENCH_MARKER.sub(lambda m: bench_markdown(m.group(1)), markdown)


def main(argv: list[str]) -> int:
    """``python docs/hooks.py [--check]``: write the settings tables into
    ``docs/configuration.md``; with ``--check``, exit 1 (naming the command) if they are
    stale instead."""
    page = CONFIGURATION_PAGE.read_text()
    fresh = with_settings(page)
    if argv[1:] == ["--check"]:
        if fresh == page:
            return 0
        sys.stderr.write(f"{CONFIGURATION_PAGE} is stale: run python docs/hooks.py\n")
        return 1
    if argv[1:]:
        sys.stderr.write("usage: python docs/hooks.py [--check]\n")
        return 2
    CONFIGURATION_PAGE.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
