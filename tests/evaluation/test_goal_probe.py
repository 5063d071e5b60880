"""The goal probes: the `Goal:` line read, listed goals found, the goal swapped in the text only;
on a policy the probes count every probed task once (listed or not) and swap only listed goals."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym_envs.babyai.env import BabyAIEpisode, fits_mission
from agentgym_rl.episode.dataset import Task
from agentgym_rl.evaluation.goal_probe import (
    goal_of,
    listed_goals,
    probe_goals,
    probe_policy,
    swap_goal,
)
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


# --- the scoring, on scripted policies whose behaviour is known ---------------------------------
TASKS = [Task(f"babyai_{i}", "babyai", i, "GoToLocal") for i in range(9, 1609, 40)]


def _listed_action(observation: str, goal: str) -> str | None:
    """The listed `go to` action that does `goal`, if one is listed."""
    return next((f"{g} 1" for g in listed_goals(observation) if fits_mission(f"{g} 1", goal)), None)


def _reply(thought: str, action: str) -> str:
    return f"Thought: {thought}\nAction: {action}"


def always_the_goal(observation: str) -> str:
    """The scripted rule: the goal's action where listed, else turn to look."""
    goal = goal_of(observation) or ""
    return _reply(goal, _listed_action(observation, goal) or "turn left")


def never_the_goal(observation: str) -> str:
    """A listed object other than the goal, every time; a thought that names nothing."""
    goal = goal_of(observation) or ""
    other = next(g for g in listed_goals(observation) if not fits_mission(f"{g} 1", goal))
    return _reply("something", f"{other} 1")


def test_a_policy_that_always_does_its_goal_scores_one_everywhere() -> None:
    shares = probe_policy(always_the_goal, TASKS).to_dict()["overall"]
    assert shares["tasks"] > 10 and shares["goal_listed"] > 0 and shares["goal_unlisted"] > 0
    assert shares["swaps"] > 0
    assert shares["thought_names_goal"] == 1.0
    assert shares["does_listed_goal"] == 1.0 and shares["turns_when_unlisted"] == 1.0
    assert shares["follows_swapped_goal"] == 1.0 and shares["keeps_old_goal"] == 0.0


def test_a_policy_that_never_does_its_goal_scores_zero() -> None:
    shares = probe_policy(never_the_goal, TASKS).to_dict()["overall"]
    assert shares["tasks"] > 10 and shares["swaps"] > 0
    assert shares["thought_names_goal"] == 0.0
    assert shares["does_listed_goal"] == 0.0 and shares["turns_when_unlisted"] == 0.0
    assert shares["follows_swapped_goal"] == 0.0


def test_a_policy_that_goes_to_the_first_listed_object_scores_where_that_is_the_goal() -> None:
    """Its shares are the shares of shown observations whose first listed object is their goal:
    counted here from the observations it was shown, apart from the probe's own counting."""
    shown: list[str] = []

    def first_listed(observation: str) -> str:
        shown.append(observation)
        return _reply("", f"{listed_goals(observation)[0]} 1")

    shares = probe_policy(first_listed, TASKS).to_dict()["overall"]
    # a swapped observation differs from the one shown just before in its Goal line alone
    swapped = [
        i > 0 and shown[i].splitlines()[1:] == shown[i - 1].splitlines()[1:]
        for i in range(len(shown))
    ]
    firsts = [o for o, s in zip(shown, swapped, strict=True) if not s]
    swaps = [o for o, s in zip(shown, swapped, strict=True) if s]

    def first_is_goal(observation: str) -> bool:
        return fits_mission(f"{listed_goals(observation)[0]} 1", goal_of(observation) or "")

    listed = [o for o in firsts if _listed_action(o, goal_of(o) or "") is not None]
    assert shares["tasks"] == len(firsts) and shares["swaps"] == len(swaps) > 0
    assert shares["goal_listed"] == len(listed) and shares["turns_when_unlisted"] == 0.0
    assert shares["does_listed_goal"] == sum(map(first_is_goal, listed)) / len(listed)
    assert shares["follows_swapped_goal"] == sum(map(first_is_goal, swaps)) / len(swaps)
    assert 0.0 < shares["does_listed_goal"] < 1.0  # neither all nor none: the count is tested
