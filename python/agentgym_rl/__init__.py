"""agentgym-rl: multi-turn agentic RL with an asynchronous rollout engine and a Rust core.

The Python API (docs/api.md): configs (`TrainConfig.from_yaml(path, overrides)`, `.to_yaml()`,
`ConfigError`), a one-machine run (`train(config)`, `train(config, background=True)`,
`resume(run_dir)`), evaluation (`evaluate(model=... | endpoint=... | run=..., splits=...)`), a
run's records (`runs.open(run_dir)`), episodes with any policy (`play(policy, tasks)`: `agentgym_rl.rollout` is the rollout
server's package), an
env server for a `with` block (`serve_env(name, **options)`), the env pool and its types, and
the core's trajectory buffer. Names load on first use, so `import agentgym_rl` stays light (no
pydantic, torch or vLLM until asked for). The data flow and where each part lives:
docs/architecture.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentgym_rl._core import (
    AgentGymError,
    CreatedEpisode,
    EnvPool,
    EnvPoolError,
    EnvServer,
    EnvServerStatus,
    Group,
    Sample,
    StepOutcome,
    Ticket,
    TrajectoryBuffer,
    __version__,
)

if TYPE_CHECKING:
    from agentgym_rl import runs
    from agentgym_rl.config import (
        ConfigError,
        EngineConfig,
        LearnConfig,
        RolloutConfig,
    )
    from agentgym_rl.config.evaluate import EvalOptions
    from agentgym_rl.config.train import TrainConfig
    from agentgym_rl.episode.scoring import EvalReport
    from agentgym_rl.evaluation.blocking import evaluate
    from agentgym_rl.evaluation.episodes import Episode, play
    from agentgym_rl.processes.env_servers import serve_env
    from agentgym_rl.supervise.plan import PlanError
    from agentgym_rl.supervise.run import RunHandle, RunResult, resume, train

_LAZY = {
    "ConfigError": "agentgym_rl.config",
    "EngineConfig": "agentgym_rl.config",
    "LearnConfig": "agentgym_rl.config",
    "RolloutConfig": "agentgym_rl.config",
    "TrainConfig": "agentgym_rl.config.train",
    "EvalOptions": "agentgym_rl.config.evaluate",
    "EvalReport": "agentgym_rl.episode.scoring",
    "evaluate": "agentgym_rl.evaluation.blocking",
    "Episode": "agentgym_rl.evaluation.episodes",
    "play": "agentgym_rl.evaluation.episodes",
    "serve_env": "agentgym_rl.processes.env_servers",
    "PlanError": "agentgym_rl.supervise.plan",
    "RunHandle": "agentgym_rl.supervise.run",
    "RunResult": "agentgym_rl.supervise.run",
    "resume": "agentgym_rl.supervise.run",
    "train": "agentgym_rl.supervise.run",
}
"""Public name -> the module that defines it (imported on first use)."""


def __getattr__(name: str) -> Any:
    if name == "runs":
        return importlib.import_module("agentgym_rl.runs")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'agentgym_rl' has no attribute {name!r}")


__all__ = [
    "AgentGymError",
    "ConfigError",
    "CreatedEpisode",
    "EngineConfig",
    "EnvPool",
    "EnvPoolError",
    "EnvServer",
    "EnvServerStatus",
    "Episode",
    "EvalOptions",
    "EvalReport",
    "Group",
    "LearnConfig",
    "PlanError",
    "RolloutConfig",
    "RunHandle",
    "RunResult",
    "Sample",
    "StepOutcome",
    "Ticket",
    "TrainConfig",
    "TrajectoryBuffer",
    "__version__",
    "evaluate",
    "play",
    "resume",
    "runs",
    "serve_env",
    "train",
]
