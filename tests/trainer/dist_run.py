"""Run the trainer from a JSON config (argv[1]) into argv[2]; rank 0 writes the step metrics
to argv[3]. Started as a plain process or under ``torchrun`` by test_distributed.py."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from tribunal.trainer.config import GRPOConfig
from tribunal.trainer.loop import Trainer

warnings.filterwarnings("ignore", category=FutureWarning)

if __name__ == "__main__":
    config = GRPOConfig.from_dict(json.loads(Path(sys.argv[1]).read_text()))
    trainer = Trainer(config, sys.argv[2])
    history = trainer.run()
    if trainer.rank == 0:
        Path(sys.argv[3]).write_text(json.dumps(history))
