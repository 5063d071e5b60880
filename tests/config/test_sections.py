"""A train config's sections are the per-process configs less the fields `train` fills in, and
the flags of `init-model` and `eval` are made from the same models as the YAML."""

from __future__ import annotations

import argparse

import pytest
from pydantic import BaseModel

from agentgym_rl.config.base import wired_fields
from agentgym_rl.config.flags import add_flags, from_flags, to_flags
from agentgym_rl.config.init_model import InitModelConfig, InitModelSettings
from agentgym_rl.config.learn import (
    CheckpointConfig,
    CheckpointSettings,
    LearnConfig,
    LearnSection,
)
from agentgym_rl.config.loader import ConfigError
from agentgym_rl.config.rollout import (
    BufferConfig,
    BufferSettings,
    EngineConfig,
    EnvServersConfig,
    EnvSettings,
    LearnerConfig,
    RolloutConfig,
    RolloutSection,
    StreamSettings,
)

PAIRS: list[tuple[type[BaseModel], type[BaseModel], set[str]]] = [
    (RolloutSection, RolloutConfig, set()),
    (EnvSettings, EnvServersConfig, set()),
    (BufferSettings, BufferConfig, set()),
    (StreamSettings, LearnerConfig, set()),
    (LearnSection, LearnConfig, set()),
    (CheckpointSettings, CheckpointConfig, set()),
    (InitModelSettings, InitModelConfig, {"force"}),  # a command-line switch only
]


@pytest.mark.parametrize(("section", "complete", "own"), PAIRS, ids=[p[1].__name__ for p in PAIRS])
def test_a_section_lacks_exactly_the_wired_fields(
    section: type[BaseModel], complete: type[BaseModel], own: set[str]
) -> None:
    fields, full = set(section.model_fields), set(complete.model_fields)
    assert fields <= full
    assert full - fields - own == set(wired_fields(complete))
    assert not set(wired_fields(complete)) & fields


def parse(model: type[BaseModel], argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_flags(parser, model)
    return parser.parse_args(argv)


def test_flags_round_trip_what_a_section_sets(tmp_path) -> None:  # type: ignore[no-untyped-def]
    given = InitModelConfig(
        out=tmp_path,
        env="searchqa",
        turn_cap=2,
        env_options=["topk=2", "prompt=question"],
        phrase_tokens=False,
        warmup_lr=1e-3,
        thought_line="Goal:",
        action_format="tools",
    )
    argv = to_flags(given)
    assert argv[argv.index("--action-format") + 1] == "tools"  # an enum flag takes its value
    assert argv[:2] == ["--env", "searchqa"] and "--no-phrase-tokens" in argv
    assert from_flags(InitModelConfig, parse(InitModelConfig, argv)) == given
    # a flag left out keeps the model's default: stated once, in the model
    assert from_flags(InitModelConfig, parse(InitModelConfig, ["--out", "x"])).hidden == 128


def test_flag_errors_name_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"--top-p: Input should be less than or equal to 1"):
        from_flags(EngineConfig, parse(EngineConfig, ["--top-p", "2"]))
    with pytest.raises(ConfigError, match=r"--env-option: Value error, 'x' is not KEY=VALUE"):
        from_flags(InitModelConfig, parse(InitModelConfig, ["--out", "o", "--env-option", "x"]))
    with pytest.raises(SystemExit):  # argparse refuses a choice the Literal does not have
        parse(EngineConfig, ["--dtype", "int4"])


def test_every_engine_dtype_is_a_flag_choice() -> None:
    for dtype in ("auto", "float32", "bfloat16", "float16"):
        assert from_flags(EngineConfig, parse(EngineConfig, ["--dtype", dtype])).dtype == dtype


def test_the_old_name_of_the_turn_caps_is_explained() -> None:
    from agentgym_rl.config import ScalingInterConfig

    with pytest.raises(ValueError, match="`stages` is now `turn_caps`"):
        ScalingInterConfig.model_validate({"stages": [3]})


def test_step_wise_context_is_per_env_full_by_default_and_at_least_one_turn() -> None:
    from agentgym_rl.config.evaluate import EvalOptions
    from agentgym_rl.config.rollout import EnvSettings

    assert EnvSettings(env="maze").context.window is None
    assert (
        EnvSettings.model_validate({"env": "maze", "context": {"history_turns": 4}}).context.window
        == 4
    )
    for bad in (0, -1, "last"):
        with pytest.raises(ValueError, match="history_turns"):
            EnvSettings.model_validate({"env": "maze", "context": {"history_turns": bad}})
    # eval takes the window as a flag (one for every env) or per env from a run
    parser = argparse.ArgumentParser()
    add_flags(parser, EvalOptions)
    args = parser.parse_args(["--split", "test.json", "--history-turns", "4"])
    assert from_flags(EvalOptions, args).history_turns == 4
    args = parser.parse_args(["--split", "test.json", "--history-turns", "full"])
    assert from_flags(EvalOptions, args).history_turns == "full"


def test_a_judges_reward_is_named_whole_and_sync_mode_refuses_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from agentgym_rl.config.rollout import EnvSettings, JudgeConfig, RewardConfig
    from agentgym_rl.config.train import TrainConfig
    from tiny_run import tiny_train_config

    with pytest.raises(ValueError, match=r"reward\.source 'judge' needs reward\.judge"):
        RewardConfig(source="judge")
    with pytest.raises(ValueError, match=r"reward\.source is 'env'"):
        RewardConfig(judge=JudgeConfig(model="m", url="http://j/v1"))
    local = JudgeConfig(model="m")
    assert local.is_guided and not JudgeConfig(model="m", url="http://j/v1").is_guided
    assert JudgeConfig(model="m", url="http://j/v1", guided=True).is_guided
    assert EnvSettings(env="babyai").reward.source == "env"  # the default: the env's rewards

    data = tiny_train_config(str(tmp_path / "run"), str(tmp_path / "model"))
    judge = {"model": "judge-folder", "mode": "group"}
    data["rollout"]["envs"] = [{"env": "babyai", "reward": {"source": "judge", "judge": judge}}]
    judged = TrainConfig.model_validate(data)
    assert judged.rollout.envs[0].reward.judge == JudgeConfig(model="judge-folder", mode="group")
    with pytest.raises(ValueError, match="mode: sync does not judge"):
        TrainConfig.model_validate({**data, "mode": "sync"})
