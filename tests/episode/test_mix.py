"""Several envs in one run, below the processes: the dataset mix (weights, determinism, resume,
epochs), its config forms and checks, each env's turn caps and held-out split, per-env metrics
and advantage scaling, and a mixed init-model section on the command line."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from agentgym_rl.config import ConfigError
from agentgym_rl.config.flags import add_flags, from_flags, to_flags
from agentgym_rl.config.init_model import InitModelConfig
from agentgym_rl.config.rollout import DatasetConfig, RolloutConfig
from agentgym_rl.episode.dataset import Task, TaskMix, TaskSource
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.learner.advantages import scale_per_env
from agentgym_rl.rollout.schedule import TurnSchedule

pytestmark = pytest.mark.unit


def _source(env: str, n: int, epochs: int | None = None) -> TaskSource:
    return TaskSource([Task(f"{env}_{i}", env, i) for i in range(n)], seed=1, epochs=epochs)


def _mix(draws: int = 0) -> TaskMix:
    sources = [_source("babyai", 50), _source("maze", 30)]
    return TaskMix(sources, [3.0, 1.0], seed=7, draws=draws)


def test_the_mix_draws_by_weight_and_repeats_itself() -> None:
    drawn = [_mix().next() for _ in range(1)]
    mix = _mix()
    first = [mix.next() for _ in range(400)]
    assert drawn[0] == first[0]
    counts = Counter(t.env for t in first if t is not None)
    assert 0.68 < counts["babyai"] / 400 < 0.82  # weight 3 of 4, binomial spread
    again = _mix()
    assert [again.next() for _ in range(400)] == first  # a pure function of the seed


def test_a_mix_resumes_exactly_from_its_cursor() -> None:
    full = _mix()
    expected = [full.next() for _ in range(120)]
    first = _mix()
    head = [first.next() for _ in range(47)]
    cursor = first.cursor
    sources = [
        TaskSource(s.tasks, seed=1, cursor=c)
        for s, c in zip(first.sources, cursor.sources, strict=True)
    ]
    resumed = TaskMix(sources, [3.0, 1.0], seed=7, draws=cursor.draws)
    assert head + [resumed.next() for _ in range(73)] == expected


def test_a_source_past_its_epochs_is_not_drawn_and_the_mix_ends() -> None:
    mix = TaskMix([_source("babyai", 5, epochs=1), _source("maze", 2, epochs=2)], [1.0, 9.0])
    tasks = list(mix)
    assert Counter(t.env for t in tasks) == {"babyai": 5, "maze": 4} and mix.exhausted


def test_dataset_config_forms_and_refusals() -> None:
    one = DatasetConfig.model_validate({"env": "babyai", "split": "goto_train", "group_size": 4})
    assert one.envs == ["babyai"] and one.mix[0].weight == 1.0 and one.group_size == 4
    listed = DatasetConfig.model_validate(
        [{"env": "babyai", "split": "train", "weight": 2}, {"env": "maze", "split": "train"}]
    )
    assert listed.envs == ["babyai", "maze"] and listed.group_size == 8
    for bad, message in [
        ({"env": "babyai", "split": "train", "mix": []}, "not both"),
        ({"mix": [{"env": "maze", "split": "a"}, {"env": "maze", "split": "b"}]}, "twice"),
        ({"mix": [{"env": "maze", "split": "a", "weight": 0}]}, "greater than 0"),
    ]:
        with pytest.raises(ValueError, match=message):
            DatasetConfig.model_validate(bad)


def _rollout(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "model": "m",
        "envs": [
            {"env": "babyai", "addresses": ["tcp://127.0.0.1:1"], "eval_split": "goto_test"},
            {
                "env": "maze",
                "addresses": ["tcp://127.0.0.1:2"],
                "eval_split": "test",
                "scaling_inter": {"turn_caps": [4, 8], "versions_per_stage": 5},
            },
        ],
        "dataset": {
            "mix": [{"env": "babyai", "split": "train"}, {"env": "maze", "split": "train"}]
        },
        "learner": {"endpoints": ["tcp://127.0.0.1:3"]},
        "scaling_inter": {"turn_caps": [3]},
        "eval": {"every_versions": 5},
    }
    data.update(changes)
    return data


def test_each_env_has_its_own_held_out_split_and_turn_caps() -> None:
    config = RolloutConfig.model_validate(_rollout())
    assert config.eval_splits() == {"babyai": Path("goto_test"), "maze": Path("test")}
    schedule = TurnSchedule.for_rollout(config)
    assert [schedule.budget(v, "babyai").turn_cap for v in (0, 9)] == [3, 3]
    assert [schedule.budget(v, "maze").turn_cap for v in (0, 4, 5, 50)] == [4, 4, 8, 8]
    assert schedule.for_env("maze").max_turn_cap == 8
    envs = _rollout()["envs"]
    envs[1] = {**envs[1], "eval_split": None}
    with pytest.raises(ValueError, match=r"\['maze'\] have no held-out split"):
        RolloutConfig.model_validate(_rollout(envs=envs))
    with pytest.raises(ValueError, match=r"eval\.split names one split"):
        RolloutConfig.model_validate(_rollout(eval={"split": "test"}))


def test_each_env_trains_on_its_own_reward_shaping_and_is_evaluated_on_raw_scores(chat) -> None:
    from agentgym_rl.rollout.service import env_specs

    envs = _rollout()["envs"]
    envs[1] = {**envs[1], "invalid_penalty": 0.3, "reward_floor": 0.0, "turn_cost": 0.9}
    config = RolloutConfig.model_validate(_rollout(envs=envs))
    trained, evaluated = env_specs(config, chat), env_specs(config, chat, penalties=False)
    shaping = [(s.invalid_penalty, s.reward_floor, s.turn_cost) for s in trained.values()]
    assert shaping == [(0.0, None, 0.0), (0.3, 0.0, 0.9)]
    assert {(s.invalid_penalty, s.reward_floor, s.turn_cost) for s in evaluated.values()} == {
        (0.0, None, 0.0)
    }


def test_metrics_break_a_mixed_window_down_by_env() -> None:
    class Sample:
        def __init__(self, reward: float) -> None:
            self.reward, self.status, self.turns = reward, "done", 1
            self.env_failure, self.drift = False, False

    metrics = RolloutMetrics()
    metrics.record_episode(Sample(1.0), "babyai")  # type: ignore[arg-type]
    assert "by_env" not in metrics.snapshot()  # one env: no breakdown
    for reward, env in [(1.0, "babyai"), (0.0, "babyai"), (0.0, "maze")]:
        metrics.record_episode(Sample(reward), env)  # type: ignore[arg-type]
    by_env = metrics.snapshot()["by_env"]
    assert by_env["babyai"] == {
        "episodes": 3,
        "successes": 2,
        "success_rate": 0.5,
        "reward_mean": 0.5,
    }
    assert by_env["maze"]["success_rate"] == 0.0 and by_env["maze"]["episodes"] == 1


def test_per_env_scaling_gives_each_env_unit_scale() -> None:
    advantages = torch.tensor(
        [[10.0, 10.0, 0.0], [-10.0, -10.0, 0.0], [0.1, 0.0, 0.0], [-0.1, 0.0, 0.0]]
    )
    mask = torch.tensor([[1, 1, 0], [1, 1, 0], [1, 0, 0], [1, 0, 0]], dtype=torch.float32)
    env_ids = torch.tensor([0, 0, 1, 1])
    scaled = scale_per_env(advantages, env_ids, mask)
    for env in (0, 1):
        values = scaled[(env_ids == env).unsqueeze(1) & (mask > 0)]
        assert torch.isclose(values.std(unbiased=False), torch.tensor(1.0))
    assert torch.equal(scaled[mask == 0], advantages[mask == 0])  # masked tokens untouched


def test_a_mixed_init_model_section_travels_as_flags() -> None:
    section = InitModelConfig.model_validate(
        {
            "out": "m",
            "mix": [
                {"env": "babyai", "split": "goto_train", "env_options": ["observation=compact"]},
                {"env": "maze", "system_prompt": "Walk to the goal."},
            ],
        }
    )
    assert [s.env for s in section.sources()] == ["babyai", "maze"]
    parser = argparse.ArgumentParser()
    add_flags(parser, InitModelConfig)
    back = from_flags(InitModelConfig, parser.parse_args(to_flags(section)))
    assert back.sources() == section.sources()
    with pytest.raises(ConfigError, match="--mix"):
        from_flags(InitModelConfig, parser.parse_args(["--out", "m", "--mix", '{"env": ""}']))


def test_eval_of_a_mixed_run_covers_each_env_with_its_own_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`eval --run` on the configs `train` writes for the shipped mixed config: both held-out
    splits (declared names as ENV=NAME), each env's prompt, its servers' options scoped to it,
    the larger turn cap."""
    from agentgym_rl.config.train import TrainConfig
    from agentgym_rl.evaluation import from_run
    from agentgym_rl.evaluation.job import load_tasks
    from agentgym_rl.processes.env_servers import options_for
    from agentgym_rl.supervise import plan_run, write_plan

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)  # the config's paths are the repository's
    config = TrainConfig.from_yaml(
        root / "configs/train/mixed_babyai_maze.yaml", [f"run_dir={tmp_path}"]
    )
    write_plan(plan_run(config))
    monkeypatch.setattr(from_run, "checkpoint_model", lambda run_dir, step: tmp_path / "hf")
    options = from_run.options_for_run(tmp_path)
    assert options.split == [Path("babyai=goto_test"), Path("maze=test")]
    assert isinstance(options.system_prompt, dict) and set(options.system_prompt) == {
        "babyai",
        "maze",
    }
    assert options.system_prompt["maze"].startswith("You are in a maze.")
    assert options.turn_cap == 8  # maze's own cap; babyai's is 5
    assert Counter(t.env for t in load_tasks(options)) == {"babyai": 200, "maze": 150}
    assert options.env_options == ["babyai:observation=compact"]
    assert options_for(options.env_options, "babyai") == ["observation=compact"]
    assert options_for([*options.env_options, "topk=1", "a:k=x:y"], "maze") == ["topk=1"]
    assert options_for(["a:k=x:y"], "a") == ["k=x:y"]
