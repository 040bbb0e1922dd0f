"""The trainers' own environments: verl and OpenRLHF, each installed as its users install it
(its own declared dependency ranges, from requirements/trainer-envs/<trainer>.txt) with only
tribunal-client added, in a venv of its own that ``scripts/trainer_envs.sh`` builds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import ROOT


def trainer_python(name: str) -> Path:
    """The python of ``.venv-<name>`` (``verl``, ``openrlhf``), built from its lock once
    (``make trainer-envs`` builds it too; a venv whose stamp matches its inputs is kept)."""
    subprocess.run([str(ROOT / "scripts" / "trainer_envs.sh"), "venv", name], check=True)
    return ROOT / f".venv-{name}" / "bin" / "python"


def run_driver(name: str, driver: Path, request: dict[str, Any]) -> Any:
    """``driver``'s JSON answer to ``request`` (on stdin), run by the trainer's python; fails
    with its stderr if it exits non-zero."""
    done = subprocess.run(
        [str(trainer_python(name)), str(driver)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
