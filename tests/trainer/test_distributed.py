"""ZeRO-3 over two processes (torchrun, gloo) computes the same losses as one process.

The groups of a step are split between the ranks; each group samples with a seed of its own
(run, step, group), so both runs train on the same completions, and the loss is normalised
by the tokens of all ranks, so the two runs must agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port
from tests.trainer.conftest import TRAINER_WARNINGS, base_config
from tests.trainer.test_loop import launcher_free_env
from tribunal.trainer.config import GRPOConfig
from tribunal.trainer.loop import Trainer
from tribunal.trainer.testing import StandInRewardServer

pytestmark = [*TRAINER_WARNINGS, pytest.mark.slow]

SCRIPT = str(Path(__file__).with_name("dist_run.py"))


def run(argv: list[str], tmp: Path, name: str, config: Path) -> list[dict[str, float]]:
    out = tmp / f"{name}.json"
    result = subprocess.run(
        [*argv, SCRIPT, str(config), str(tmp / name), str(out)],
        cwd=ROOT,
        env=launcher_free_env(),
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    history: list[dict[str, float]] = json.loads(out.read_text())
    return history


def test_two_processes_match_one(
    tiny_model_dir: Path, share_server: StandInRewardServer, tmp_path: Path
) -> None:
    raw = base_config(tiny_model_dir, share_server.url, max_steps=2)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(raw))
    # One process: this one (the launch of a process of its own cost some 5 s of imports).
    one = Trainer(GRPOConfig.from_dict(raw), tmp_path / "one").run()
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    two = run([*torchrun, "--master_port", str(free_port())], tmp_path, "two", config)
    assert [m["step"] for m in one] == [m["step"] for m in two] == [1, 2]
    for a, b in zip(one, two, strict=True):
        assert b["groups/total"] == a["groups/total"] == 4
        assert b["reward/mean"] == pytest.approx(a["reward/mean"], abs=1e-6)
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-3, abs=1e-6)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-3)
        assert b["loss_tokens"] == a["loss_tokens"]
