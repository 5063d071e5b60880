"""Typed configuration of agentgym-rl's processes: pydantic models only, importable without
torch or vLLM (a test enforces this). Load with `load_rollout_config(path, overrides)` or
`load_learn_config(path, overrides)`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentgym_rl.config.auth import AuthConfig
from agentgym_rl.config.learn import LearnConfig
from agentgym_rl.config.loader import ConfigError, load_config
from agentgym_rl.config.rollout import (
    ActionFormat,
    BufferConfig,
    ContextConfig,
    DatasetConfig,
    EngineConfig,
    EnvPoolConfig,
    EnvServersConfig,
    LearnerConfig,
    RolloutConfig,
    ScalingInterConfig,
)

__all__ = [
    "ActionFormat",
    "AuthConfig",
    "BufferConfig",
    "ConfigError",
    "ContextConfig",
    "DatasetConfig",
    "EngineConfig",
    "EnvPoolConfig",
    "EnvServersConfig",
    "LearnConfig",
    "LearnerConfig",
    "RolloutConfig",
    "ScalingInterConfig",
    "load_config",
    "load_learn_config",
    "load_rollout_config",
]


def load_rollout_config(path: str | Path | None, overrides: Sequence[str] = ()) -> RolloutConfig:
    """The `serve-rollouts` config from a YAML file and `key.path=value` overrides."""
    return load_config(RolloutConfig, path, overrides)


def load_learn_config(path: str | Path | None, overrides: Sequence[str] = ()) -> LearnConfig:
    """The `learn` config from a YAML file and `key.path=value` overrides."""
    return load_config(LearnConfig, path, overrides)
