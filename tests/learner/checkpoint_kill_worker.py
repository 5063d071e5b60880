"""Subprocess for test_trainer.py's kill -9 test: checkpoints back to back until killed.

Run as `python checkpoint_kill_worker.py MODEL_DIR RUN_DIR`. Each round bumps the step and
prints `saving <step>` before `save_checkpoint`, so nearly all of the process's time is spent
inside a save and a SIGKILL lands in the middle of one.
"""

from __future__ import annotations

import sys
from pathlib import Path

from trainer_fixtures import learn_config

from agentgym_rl.learner.checkpoint import save_checkpoint
from agentgym_rl.learner.trainer import Trainer


def main() -> None:
    model, run = Path(sys.argv[1]), Path(sys.argv[2])
    trainer = Trainer(learn_config(model, run))
    while True:
        trainer.step += 1
        print(f"saving {trainer.step}", flush=True)
        save_checkpoint(trainer, trainer.config.checkpoint.dir)


if __name__ == "__main__":
    main()
