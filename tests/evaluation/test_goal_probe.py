"""The goal probes: the `Goal:` line read, listed goals found, the goal swapped in the text only;
on a policy the probes count every probed task once (listed or not) and swap only listed goals."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym_envs.babyai.env import BabyAIEpisode
from agentgym_rl.episode.dataset import Task
from agentgym_rl.evaluation.goal_probe import goal_of, listed_goals, probe_goals, swap_goal
from agentgym_rl.policy_creation import create_tiny_model
from vllm_fixtures import tiny_corpus

pytestmark = pytest.mark.unit

OBSERVATION = (
    "Goal: go to red ball\nWalls: left 1\nSeen: red ball 1 at 2 forward, blue key 1 at 1 left\n"
    "Actions: turn left, turn right, move forward, go to red ball 1, pick up red ball 1, "
    "go to blue key 1, pick up blue key 1"
)


def test_the_goal_and_the_listed_goals_are_read_and_the_goal_swapped() -> None:
    assert goal_of(OBSERVATION) == "go to red ball"
    assert listed_goals(OBSERVATION) == ["go to red ball", "go to blue key"]
    swapped = swap_goal(OBSERVATION, "go to blue key")
    assert goal_of(swapped) == "go to blue key"
    assert swapped.splitlines()[1:] == OBSERVATION.splitlines()[1:]


def test_a_real_observation_lists_its_goal_in_the_compact_form() -> None:
    episode = BabyAIEpisode(compact=True)
    seen = 0
    for data_idx in range(9, 1200, 40):  # GoToLocal
        observation = episode.reset(data_idx).observation
        goal = goal_of(observation)
        assert goal is not None and goal.startswith("go to ")
        seen += goal in listed_goals(observation)
    episode.close()
    assert seen > 0  # the goal is in view at the start of some tasks


def test_probing_a_policy_counts_each_task_once(tmp_path: Path) -> None:
    model = create_tiny_model(tmp_path / "m", corpus=tiny_corpus(), vocab_size=320, seed=0)
    tasks = [Task(f"babyai_{i}", "babyai", i, "GoToLocal") for i in range(9, 809, 40)]
    probe = probe_goals(model, tasks, max_new_tokens=8).to_dict()
    overall = probe["overall"]
    assert 0 < overall["tasks"] <= len(tasks)
    assert overall["goal_listed"] + overall["goal_unlisted"] == overall["tasks"]
    assert overall["swaps"] <= overall["tasks"]
    assert probe["by_category"]["GoToLocal"]["tasks"] == overall["tasks"]
    # a random model writes no Thought line naming the goal
    assert overall["thought_names_goal"] == 0.0
