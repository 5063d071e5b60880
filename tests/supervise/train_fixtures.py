"""Helpers of the `train` supervisor tests (fixtures themselves are in conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentgym_rl.config.train import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
SPLIT = ROOT / "envs" / "agentgym_envs" / "babyai" / "data" / "train.json"


def train_config(data: dict[str, Any]) -> TrainConfig:
    return TrainConfig.model_validate(data)
