"""A spec's combination as OpenEnv's rubric containers and back (``tribunal.envs.rubrics``):
round trips of the shipped specs, refusals named, and the tree evaluated by OpenEnv's own
containers (``openenv-core`` 0.3.0 in .venv-openenv) equal to the gateway's reward over seeded
component values, gates open and closed."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.envs.conftest import client_python
from tribunal.envs.rubrics import rubric_to_spec, spec_to_rubric
from tribunal.gateway.scorer import ComponentResult, combine
from tribunal.gateway.specs import SpecError, load_spec_text, load_specs

SPECS = ROOT / "services" / "tribunal" / "gateway" / "specs"

GATED = """
name: gated
version: "1"
components:
  format: {builtin: num_turns, gate: {threshold: 0.5}}
  correct: {verifier: math, inputs: {response: response, ground_truth: ground_truth}, weight: 3}
  style: {builtin: num_turns, weight: 0.5}
"""


def test_the_shipped_weighted_sums_go_there_and_back() -> None:
    mapped = 0
    for name, loaded in load_specs([SPECS]).items():
        if loaded.spec.formula is not None:
            with pytest.raises(SpecError, match="formula"):
                spec_to_rubric(loaded.spec)
            continue
        tree = spec_to_rubric(loaded.spec)
        back = rubric_to_spec(tree, loaded.spec.components, name=name, version="2")
        assert back.components.keys() == loaded.spec.components.keys()
        for key, component in back.components.items():
            original = loaded.spec.components[key]
            assert component.weight == pytest.approx(original.weight)
            assert component.gate == original.gate and component.one_of == original.one_of
        mapped += 1
    assert mapped >= 4  # the refiner's three and rloo_math


def test_what_no_container_expresses_is_refused_by_name() -> None:
    closed_reward = GATED.replace("threshold: 0.5}", "threshold: 0.5, reward: -1}")
    with pytest.raises(SpecError, match=r"components\.format\.gate\.reward"):
        spec_to_rubric(load_spec_text(closed_reward).spec)
    with pytest.raises(SpecError, match=r"components\.format\.gate\.threshold"):
        spec_to_rubric(load_spec_text(GATED.replace("0.5}", "0}")).spec)
    product = GATED + "combine: product\n"
    with pytest.raises(SpecError, match="combine"):
        spec_to_rubric(load_spec_text(product).spec)


def test_openenvs_containers_compute_the_gateways_reward() -> None:
    loaded = load_spec_text(GATED)
    rng = random.Random(39)
    cases = [
        {
            "format": rng.choice([0.0, 0.4, 0.5, 1.0]),
            "correct": rng.choice([0.0, 1.0]),
            "style": round(rng.random(), 3),
        }
        for _ in range(40)
    ]
    expected = []
    for values in cases:
        results = {name: ComponentResult(reward=value) for name, value in values.items()}
        expected.append(combine(loaded, results).reward)
    assert {reward == 0 for reward in expected} == {True, False}  # gates closed and open
    request = json.dumps({"tree": spec_to_rubric(loaded.spec), "values": cases})
    python: Path = client_python("openenv")
    done = subprocess.run(
        [str(python), str(ROOT / "tests" / "envs" / "rubrics_driver.py")],
        input=request,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == pytest.approx(expected)
