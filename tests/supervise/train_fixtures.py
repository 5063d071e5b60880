"""Helpers of the `train` supervisor tests (fixtures themselves are in conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentgym_rl.config.train import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
SPLIT = ROOT / "envs" / "agentgym_envs" / "babyai" / "data" / "train.json"
if str(ROOT / "envs") not in sys.path:  # the env registry, as `agentgym-rl env` sees it
    sys.path.insert(0, str(ROOT / "envs"))


def train_config(data: dict[str, Any]) -> TrainConfig:
    return TrainConfig.model_validate(data)
