"""The trainer through the whole stack, on CPU: a tiny random Qwen3 policy on DeepSpeed ZeRO-3
trains for two steps per reward spec against the gateway, with math, code, judge and citation
behind it, every one an API and a worker process on one real Redis; the judge and the
citation scorer grade with a tiny random Qwen3 on the ``transformers`` backend. Data: the
shared DR Tulu-style traces and ScholarQA rubrics, MATH-500 and GSM8K (bench/training_data.py).

A random model's verdicts and answers mean nothing: what is checked is that every completion
is scored through the whole stack, with every component's reward in the trainer's metrics.
The commands are the tutorial's (docs/tutorial-training.md).
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from bench.training_data import tiny_judge_model, write_datasets
from tests.conftest import DATA, ROOT, need_data
from tests.e2e.test_readme import sh_blocks
from tests.trainer.conftest import TRAINER_WARNINGS
from tribunal.testing.stack import FullStack, RedisServer, free_port, start_full_stack
from tribunal.trainer.config import GRPOConfig, expand_variables
from tribunal.trainer.loop import Trainer

pytestmark = [
    *TRAINER_WARNINGS,
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]

TUTORIAL = ROOT / "docs" / "tutorial-training.md"

# The spec's components, each of which must appear as reward/<spec>/<component>/mean.
COMPONENTS = {
    "refiner_rubric_citation": ("judge", "citation"),
    "tcr_agent": ("correct", "num_turns", "overlong"),
    "rloo_math": ("math",),
}


def tutorial_lines(marker: str) -> list[list[str]]:
    """The tutorial's sh lines holding ``marker``, split as a shell splits them."""
    return [
        shlex.split(line)
        for block in sh_blocks(TUTORIAL)
        for line in block.splitlines()
        if marker in line
    ]


@dataclass
class Tutorial:
    """What the tutorial's commands made and name: the datasets and the judge's model in a
    temporary directory, the stack's variables, the training commands' configs."""

    datasets: dict[str, Path]
    judge_env: dict[str, dict[str, str]]
    configs: dict[str, Path]


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory: pytest.TempPathFactory) -> Tutorial:
    need_data(DATA / "research" / "scholarqa_cs_rubrics.json")
    tmp = tmp_path_factory.mktemp("tutorial")
    [data_line] = tutorial_lines("bench.training_data")
    assert data_line[:3] == [".venv/bin/python", "-m", "bench.training_data"]
    options = dict(zip(data_line[4::2], data_line[5::2], strict=True))
    datasets = write_datasets(tmp / data_line[3], int(options["--rows"]))
    judge_model = tiny_judge_model(tmp / options["--judge-model"])
    [up_line] = tutorial_lines("tribunal up")
    assert up_line[-2:] == [".venv/bin/tribunal", "up"]
    env = dict(word.split("=", 1) for word in up_line[:-2])
    judge_env: dict[str, dict[str, str]] = {"judge": {}, "citation": {}}
    for name, value in env.items():
        moved = str(judge_model) if value == options["--judge-model"] else value
        judge_env[name.split("_")[1].lower()][name] = moved
    configs = {}
    for argv in tutorial_lines(" train "):
        assert argv[:2] == [".venv/bin/tribunal", "train"]
        config = ROOT / dict(zip(argv[2::2], argv[3::2], strict=True))["--config"]
        configs[yaml.safe_load(config.read_text())["reward_spec"]] = config
    assert set(configs) == set(COMPONENTS)
    return Tutorial(datasets, judge_env, configs)


@pytest.fixture(scope="module")
def full_stack(tutorial: Tutorial, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FullStack]:
    """Redis with an append-only file, the four verifiers and the gateway, started once, the
    judge and the citation scorer with the tutorial's variables."""
    tmp = tmp_path_factory.mktemp("stack")
    redis = RedisServer.on_free_port(aof_dir=tmp)
    redis.start()
    env = {
        "TRIBUNAL_KEY_PREFIX": f"train{free_port()}",
        "TRIBUNAL_MATH_PROCESSES": "1",
        "TRIBUNAL_CITATION_PROCESSES": "1",
    }
    try:
        stack = start_full_stack(
            redis.url, env=env, service_env=tutorial.judge_env, log_dir=tmp / "logs"
        )
    except BaseException:
        redis.stop(0)
        raise
    try:
        yield stack
    except BaseException:
        print(stack.log_text()[-20000:])
        raise
    finally:
        stack.stop()
        redis.stop()


def moved_config(config: Path, dataset: Path, stack: FullStack) -> GRPOConfig:
    """The shipped config with its URLs moved to the stack's free ports and its dataset to
    the one the tutorial's first command wrote here."""
    raw = expand_variables(yaml.safe_load(config.read_text()), {})
    assert raw["gateway_url"] == "http://127.0.0.1:8100"
    assert Path(raw["dataset"]).name == dataset.name
    raw |= {"gateway_url": stack.gateway_url, "dataset": str(dataset)}
    if "tools" in raw:
        assert raw["tools"]["code_url"] == "http://127.0.0.1:8102"
        raw["tools"]["code_url"] = stack.services["code"].base_url
    return GRPOConfig.from_dict(raw)


@pytest.mark.parametrize("spec", list(COMPONENTS))
def test_the_trainer_through_the_whole_stack(
    spec: str, full_stack: FullStack, tutorial: Tutorial, tmp_path: Path
) -> None:
    config = moved_config(tutorial.configs[spec], tutorial.datasets[spec], full_stack)
    history = Trainer(config, tmp_path / "run").run()
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    logged = [json.loads(line) for line in lines]
    assert [m["step"] for m in logged] == [1, 2] == [m["step"] for m in history]
    for metrics in logged:
        # every completion scored through the gateway; nothing dropped, nothing retried
        assert metrics["reward/scored_fraction"] == 1.0, metrics
        assert metrics["groups/dropped"] == 0 and metrics["groups/retries"] == 0
        assert metrics[f"reward/{spec}/mean"] is not None
        for component in COMPONENTS[spec]:
            assert metrics[f"reward/{spec}/{component}/mean"] is not None, (component, metrics)
        assert not [k for k in metrics if k.startswith(("reward_errors/", "reward_failures/"))]
    assert (tmp_path / "run" / "final" / "config.json").exists()
