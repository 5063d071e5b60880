"""Fixtures of the `train` supervisor tests: a stub model folder (the plan only checks that the
HF files are there) and a minimal valid train config as a mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from train_fixtures import SPLIT


@pytest.fixture
def stub_model(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (model / name).write_text("{}")
    return model


@pytest.fixture
def train_data(tmp_path: Path, stub_model: Path) -> dict[str, Any]:
    return {
        "run_dir": str(tmp_path / "run"),
        "model": str(stub_model),
        "env_servers": [{"env": "noop"}],
        "rollout": {"dataset": {"env": "noop", "split": str(SPLIT), "group_size": 2}},
        "learn": {"max_steps": 2, "optimizer": {"warmup_steps": 0}},
    }
