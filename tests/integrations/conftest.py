"""The trainers' own environments: verl and OpenRLHF, each installed as its users install it
(its own declared dependency ranges, from requirements/trainer-envs/<trainer>.txt) with only
tribunal-client added, in a venv of its own that ``scripts/trainer_envs.sh`` builds."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT


def trainer_python(name: str) -> Path:
    """The python of ``.venv-<name>`` (``verl``, ``openrlhf``, ``trl``), built from its lock once
    (``make trainer-envs`` builds it too; a venv whose stamp matches its inputs is kept)."""
    subprocess.run([str(ROOT / "scripts" / "trainer_envs.sh"), "venv", name], check=True)
    return ROOT / f".venv-{name}" / "bin" / "python"


DRIVERS: dict[tuple[str, Path], tuple[subprocess.Popen[str], Path]] = {}
"""The driver processes started so far, by (trainer, driver), each with its stderr log."""


def run_driver(name: str, driver: Path, request: dict[str, Any]) -> Any:
    """``driver``'s JSON answer to ``request`` (a line on its stdin), from one process per
    (trainer, driver) for the test session, run by the trainer's python; fails with the tail
    of its stderr if it answers nothing."""
    if (name, driver) not in DRIVERS:
        log = Path(tempfile.mkdtemp(prefix=f"{name}-driver-")) / "stderr.log"
        with log.open("w") as stderr:
            process = subprocess.Popen(
                [str(trainer_python(name)), str(driver)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=ROOT,
            )
        DRIVERS[name, driver] = process, log
    process, log = DRIVERS[name, driver]
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(request) + "\n")
    process.stdin.flush()
    line = process.stdout.readline()
    assert line, log.read_text()[-4000:]
    return json.loads(line)


@pytest.fixture(scope="session", autouse=True)
def _stop_drivers() -> Iterator[None]:
    """End the driver processes with the session."""
    yield
    for process, _ in DRIVERS.values():
        assert process.stdin is not None
        process.stdin.close()
        process.terminate()
        process.wait(timeout=60)
        assert process.stdout is not None
        process.stdout.close()
    DRIVERS.clear()
