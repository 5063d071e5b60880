"""Evaluating a `train` run's checkpoint as the run itself evaluated: `eval --run RUN_DIR`.

Contract: `options_for_run(run_dir, step=None)` reads the run's own configs
(`configs/train.yaml`, `configs/rollout-0.yaml`) and its checkpoints and returns the
`EvalOptions` that evaluate the latest complete checkpoint's HF export (or `step`'s) the way the
run's held-out evaluation did: its split, samples per task, task limit and turn cap (the
evaluation's, else the largest ScalingInter cap), the engine's options with the evaluation's
temperature, each env's system prompt and action format (tool mode with its parser and calls
per turn) and the env servers' `--env-option`s. `given` replaces any
of those (`split`, `n`, `engine`, ...). Anything missing (not a run folder, no complete
checkpoint, no HF export, no split) raises `EvalError` saying what to pass instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentgym_rl.config.evaluate import EvalError, EvalOptions
from agentgym_rl.config.loader import ConfigError
from agentgym_rl.config.rollout import RolloutConfig
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.env_discovery import is_split_name
from agentgym_rl.learner.checkpoint_dirs import complete_checkpoints


def checkpoint_model(run_dir: Path, step: int | None = None) -> Path:
    """The HF export of the run's latest complete checkpoint, or of `step`'s."""
    found = dict(complete_checkpoints(run_dir / "checkpoints"))
    if not found:
        raise EvalError(f"--run {run_dir}: no complete checkpoint in {run_dir / 'checkpoints'}")
    if step is not None and step not in found:
        raise EvalError(f"--step {step}: no complete checkpoint; the run has {sorted(found)}")
    chosen = found[step if step is not None else max(found)]
    if not (chosen / "hf" / "config.json").is_file():
        raise EvalError(f"{chosen} has no HF export (hf/): the run had checkpoint.export_hf off")
    return chosen / "hf"


def options_for_run(run_dir: str | Path, step: int | None = None, **given: Any) -> EvalOptions:
    """See the module docstring."""
    run_dir = Path(run_dir)
    configs = run_dir / "configs"
    try:
        train = TrainConfig.from_yaml(configs / "train.yaml")
        rollout = RolloutConfig.from_yaml(configs / "rollout-0.yaml")
    except ConfigError as e:
        raise EvalError(f"--run {run_dir}: not a readable train run folder ({e})") from None
    held_out = rollout.eval
    # a split an env declares by name goes as ENV=NAME (a file as its path)
    splits = [
        Path(f"{env}={split}") if is_split_name(split) else split
        for env, split in (rollout.eval_splits() if held_out else {}).items()
    ]
    split = given.pop("split", None) or splits
    if not split:
        raise EvalError(f"--run {run_dir}: the run had no held-out evaluation; give --split")
    engine = rollout.engine
    if held_out is not None and held_out.temperature is not None:
        engine = engine.model_copy(update={"temperature": held_out.temperature})
    envs = rollout.dataset.envs
    caps = [rollout.turn_caps(env).turn_caps[-1] for env in envs]
    served = {env: rollout.env_servers(env) for env in envs}
    prompts = {env: entry.system_prompt for env, entry in served.items()}
    own = dict(
        split=split,
        model=checkpoint_model(run_dir, step),
        engine=engine,
        n=held_out.samples_per_task if held_out else 1,
        turn_cap=(held_out.turn_cap if held_out else None) or max(caps),
        limit=held_out.limit if held_out else None,
        system_prompt=prompts[envs[0]]
        if len(envs) == 1
        else {env: prompt for env, prompt in prompts.items() if prompt is not None},
        env_options=[
            option if len(envs) == 1 else f"{env}:{option}"
            for env in envs
            for option in _env_options(train, env)
        ],
        action_format={env: entry.action_format.value for env, entry in served.items()},
        tool_parser={env: entry.tool_parser for env, entry in served.items()},
        tool_calls_per_turn={env: entry.tool_calls_per_turn for env, entry in served.items()},
        history_turns={env: entry.context.history_turns for env, entry in served.items()},
    )
    return EvalOptions.model_validate({**own, **given})


def _env_options(train: TrainConfig, env: str) -> list[str]:
    """The `--env-option` values the run's servers of `env` were started with."""
    return next((s.env_option_args for s in train.env_servers if s.name == env), [])


__all__ = ["checkpoint_model", "options_for_run"]
