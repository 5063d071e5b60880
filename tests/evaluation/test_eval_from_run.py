"""`eval --run RUN_DIR`: a run's checkpoint evaluated with the run's own settings, read from the
configs `train` wrote (no engine here: the options only)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from agentgym_rl.commands import evaluate as command
from agentgym_rl.config.loader import ConfigError
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.evaluation import EvalError
from agentgym_rl.evaluation.from_run import options_for_run
from agentgym_rl.supervise import plan_run, write_plan

ROOT = Path(__file__).resolve().parents[2]
HELD_OUT = "envs/agentgym_envs/babyai/data/goto_test.json"


def a_run(tmp_path: Path, **rollout: Any) -> Path:
    """A run folder as `train` leaves it: its configs, and checkpoints at steps 2 and 4 (the
    latter still being written: no COMPLETE mark)."""
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (model / name).write_text("{}")
    train = TrainConfig.model_validate(
        {
            "run_dir": str(tmp_path / "run"),
            "model": str(model),
            "env_servers": [{"env": "babyai", "args": ["--env-option", "observation=compact"]}],
            "rollout": {
                "engine": {"temperature": 0.7, "max_tokens_per_turn": 24, "dtype": "float32"},
                "envs": [{"env": "babyai", "system_prompt": "Be brief."}],
                "scaling_inter": {"turn_caps": [3, 5]},
                **rollout,
            },
            "learn": {"max_steps": 4},
        }
    )
    write_plan(plan_run(train))
    for step, complete in ((2, True), (4, False)):
        hf = train.run_dir / "checkpoints" / f"step_{step}" / "hf"
        hf.mkdir(parents=True)
        (hf / "config.json").write_text("{}")
        if complete:
            (hf.parent / "COMPLETE").write_text("")
    return train.run_dir


def test_the_runs_settings_are_the_evaluations(tmp_path: Path) -> None:
    held_out = {"split": HELD_OUT, "temperature": 0.0, "samples_per_task": 2, "limit": 5}
    run = a_run(tmp_path, eval=held_out)
    options = options_for_run(run)
    assert options.model == run / "checkpoints" / "step_2" / "hf"  # step 4 is incomplete
    assert (options.split, options.n, options.limit) == ([Path(HELD_OUT)], 2, 5)
    assert options.turn_cap == 5  # the largest ScalingInter cap
    assert options.engine.temperature == 0.0  # the held-out decoding, not training's 0.7
    assert (options.engine.max_tokens_per_turn, options.engine.dtype) == (24, "float32")
    assert options.system_prompt == "Be brief."
    assert options.env_options == ["observation=compact"]
    with pytest.raises(EvalError, match=r"--step 4: no complete checkpoint; the run has \[2\]"):
        options_for_run(run, step=4)


def test_flags_given_override_the_runs_and_missing_parts_are_named(tmp_path: Path) -> None:
    run = a_run(tmp_path)
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(["--run", str(run), "--split", HELD_OUT, "--temperature", "0.3"])
    options = command.eval_options(args)
    assert options.engine.temperature == 0.3 and options.engine.max_tokens_per_turn == 24
    assert options.turn_cap == 5 and options.n == 1
    with pytest.raises(EvalError, match="no held-out evaluation; give --split"):
        command.eval_options(parser.parse_args(["--run", str(run)]))
    with pytest.raises(EvalError, match="one of --run RUN_DIR, --model DIR"):
        command.eval_options(parser.parse_args(["--run", str(run), "--model", str(run)]))
    with pytest.raises(EvalError, match="not a readable train run folder"):
        options_for_run(tmp_path)


def test_the_runs_action_format_per_env_and_the_flag_over_it(tmp_path: Path) -> None:
    envs = [{"env": "babyai", "action_format": "tools", "tool_parser": "hermes"}]
    run = a_run(tmp_path, envs=envs, eval={"split": HELD_OUT})
    options = options_for_run(run)
    assert options.action_format == {"babyai": "tools"}
    assert options.tool_parser == {"babyai": "hermes"}
    assert options.tool_calls_per_turn == {"babyai": 1}
    (tmp_path / "own").mkdir()
    own = options_for_run(a_run(tmp_path / "own", eval={"split": HELD_OUT}))
    assert own.action_format == {"babyai": "react"}  # the format babyai declares
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(["--run", str(run), "--action-format", "react"])
    assert command.eval_options(args).action_format == "react"
    args = parser.parse_args(["--run", str(run), "--env-option", "extra=1", "--n", "3"])
    given = command.eval_options(args)  # a list flag adds to the run's, a value replaces it
    assert (given.env_options, given.n) == ([*options.env_options, "extra=1"], 3)
    with pytest.raises(ConfigError, match="--n: Input should be greater than or equal to 1"):
        command.eval_options(parser.parse_args(["--run", str(run), "--n", "0"]))
