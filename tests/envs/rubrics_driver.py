"""Evaluates a spec's rubric tree (``tribunal.envs.rubrics.spec_to_rubric``) with OpenEnv's own
containers (``openenv-core`` 0.3.0: ``Sequential``, ``Gate``, ``WeightedSum``): run in
.venv-openenv by tests/envs/test_rubrics.py, which sends ``{"tree", "values"}`` on stdin (the
component values of each case) and reads ``scale x`` the root's score of each case.
"""

import json
import sys

from openenv.core.rubrics import Gate, Rubric, Sequential, WeightedSum


class Component(Rubric):
    """A leaf: the case's value of one component (the observation carries the values)."""

    def __init__(self, name):
        super().__init__()
        self.name = name

    def forward(self, action, observation):
        return observation[self.name]


def build(node):
    if node["type"] == "Component":
        return Component(node["name"])
    if node["type"] == "Gate":
        return Gate(build(node["rubric"]), threshold=node["threshold"])
    if node["type"] == "WeightedSum":
        return WeightedSum([build(child) for child in node["rubrics"]], node["weights"])
    return Sequential(*[build(child) for child in node["rubrics"]])


request = json.load(sys.stdin)
root = build(request["tree"]["rubric"])
scale = request["tree"]["scale"]
print(json.dumps([scale * root(None, values) for values in request["values"]]))
