"""The trainers' own environments (.venv-verl, .venv-openrlhf) are what their users get: the
trainer at its pin with its own declared dependency ranges met (transformers among them), the
distribution docs/integrations.md installs beside it and nothing of Tribunal's services, and
missing only what requirements/trainer-envs/<trainer>.in leaves out by name (it cannot install
without a GPU)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import ROOT
from tests.e2e.test_readme import sh_blocks
from tests.integrations.conftest import trainer_python

pytestmark = pytest.mark.e2e

# What the venv reports of itself: its distributions, the trainer's declared requirements,
# and `pip check`'s lines.
REPORT = """
import json, subprocess, sys
from importlib import metadata
trainer = sys.argv[1]
dists = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in metadata.distributions()}
requires = metadata.requires(trainer)
check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
print(json.dumps({"dists": dists, "requires": requires, "check": check.stdout.splitlines()}))
"""


def documented_distribution() -> str:
    """The one distribution docs/integrations.md installs into a trainer's environment."""
    [line] = [
        line
        for block in sh_blocks(ROOT / "docs" / "integrations.md")
        for line in block.splitlines()
        if line.startswith("pip install ")
    ]
    [name] = line.removeprefix("pip install ").split()
    return name


@pytest.mark.parametrize(("trainer", "version"), [("verl", "0.9.1"), ("openrlhf", "0.11.2")])
def test_a_trainers_environment_is_its_own_with_the_client_distribution(
    trainer: str, version: str, tmp_path: Path
) -> None:
    python = trainer_python(trainer)
    # Run from elsewhere: the checkout's own tribunal_rl.egg-info would count as installed.
    done = subprocess.run(
        [str(python), "-c", REPORT, trainer],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    report = json.loads(done.stdout)
    dists = report["dists"]
    assert dists[trainer] == version
    client = documented_distribution()
    assert client == "tribunal-client" and client in dists
    assert "tribunal-rl" not in dists and "math-verify" not in dists
    # The transformers it resolved is inside the trainer's own declared range (no extra's).
    requires = [Requirement(r) for r in report["requires"]]
    [requirement] = [r for r in requires if r.name == "transformers" and r.marker is None]
    assert requirement.specifier.contains(dists["transformers"]), (requirement, dists)
    # What pip finds missing is exactly what the .in leaves out, by name.
    source = (ROOT / "requirements" / "trainer-envs" / f"{trainer}.in").read_text()
    left_out = {pin.split("==")[0] for pin in re.findall(r"^# left out: ([^:]+):", source, re.M)}
    # (a version outside a declared range would be a line of another form)
    missing = set()
    for line in report["check"]:
        if line != "No broken requirements found.":
            found = re.fullmatch(r"\S+ \S+ requires (\S+), which is not installed\.", line)
            assert found, line
            missing.add(found[1])
    assert missing == left_out, report["check"]


def test_trls_environment_is_trl_with_its_openreward_extra_and_nothing_of_tribunal(
    tmp_path: Path,
) -> None:
    """.venv-trl (tests/envs/test_trl_ors.py) is ``pip install trl[openreward]==1.16.0`` with
    torch: the extra's openreward and TRL's own ranges met, no tribunal distribution at all (the
    adapter talks to Tribunal with the openreward SDK alone)."""
    python = trainer_python("trl")
    done = subprocess.run(
        [str(python), "-c", REPORT, "trl"], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    report = json.loads(done.stdout)
    dists = report["dists"]
    assert dists["trl"] == "1.16.0" and "openreward" in dists and "torch" in dists
    assert not {"tribunal-client", "tribunal-rl"} & set(dists)
    requires = [Requirement(r) for r in report["requires"]]
    [extra] = [r for r in requires if r.marker and r.marker.evaluate({"extra": "openreward"})]
    assert extra.name == "openreward" and extra.specifier.contains(dists["openreward"])
    assert report["check"] == ["No broken requirements found."]
