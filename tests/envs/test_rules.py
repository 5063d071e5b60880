"""Each env's scripted rule (`Episode.rule_action`), the yardstick above chance: it reads what the
episode shows and so beats the env's random valid actions by a wide margin on the same tasks;
an env without one says so; `python -m agentgym_envs.chance --policy rule` measures it."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from agentgym_envs import load_env
from agentgym_envs.babyai.env import BabyAIEpisode, fits_mission
from agentgym_envs.chance import declares_rule, yardstick_success
from agentgym_envs.maze.env import MazeEpisode
from agentgym_envs.noop import NoopEnvironment
from agentgym_envs.wordle.env import WordleEnvironment, feedback


def _both(
    env_name: str, split: str, cap: int, every: int, **options: str
) -> tuple[dict[str, float], dict[str, float]]:
    """(rule, chance) success on every `every`-th task of the env's `split` at turn cap `cap`."""
    env = load_env(env_name, **options)
    rows = _rows(env_name, split, every)
    try:
        rule = yardstick_success(env, rows, turn_cap=cap, tries=2, policy="rule")
        chance = yardstick_success(env, rows, turn_cap=cap, tries=4, policy="random")
    finally:
        env.close()
    return rule, chance


def _rows(env: str, split: str, every: int = 1) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = type(load_env(env)).tasks(split)
    return rows[::every]


def test_babyai_rule_goes_to_the_goal_among_distractors() -> None:
    """GoToLocal: the goal is one of several visible objects. The rule names it whenever it is
    listed, so it solves nearly every task within the turn cap, far above random picks."""
    env = load_env("babyai", observation="compact")
    rows = [r for r in _rows("babyai", "goto_test") if r["category"] == "GoToLocal"]
    try:
        rule = yardstick_success(env, rows, turn_cap=5, tries=1, policy="rule")
        chance = yardstick_success(env, rows, turn_cap=5, tries=3, policy="random")
    finally:
        env.close()
    assert rule["GoToLocal"] >= 0.9
    assert chance["GoToLocal"] < rule["GoToLocal"] - 0.4


def test_babyai_rule_turns_when_the_goal_is_not_listed() -> None:
    episode = BabyAIEpisode(compact=True)
    rng = random.Random(0)
    for data_idx in range(9, 4000, 40):  # GoToLocal tasks
        episode.reset(data_idx)
        goal = episode.observation().splitlines()[0].removeprefix("Goal: ")
        action = episode.rule_action(rng)
        listed = [a for a in episode.available_actions() if fits_mission(a, goal)]
        assert action in listed if listed else action == "turn left"
    episode.close()


@pytest.mark.parametrize(
    ("action", "mission", "fits"),
    [
        ("go to red ball 1", "go to red ball", True),
        ("go to red ball 2", "go to ball", True),
        ("go to blue ball 1", "go to red ball", False),
        ("pick up red key 1", "go to red key", False),
        ("pick up red key 1", "pick up red key", True),
        ("go to red key 1", "go to red ball then go to blue key", False),
    ],
)
def test_an_action_fits_a_mission_by_verb_and_object(action: str, mission: str, fits: bool) -> None:
    assert fits_mission(action, mission) is fits


@pytest.mark.parametrize("data_idx", range(200_000, 200_040, 3))
def test_maze_rule_is_a_search_that_reaches_every_goal(data_idx: int) -> None:
    """Never refused, never re-enters a dead end it left, and reaches the goal within twice the
    cells' count of moves (a depth-first search over a perfect maze)."""
    episode = MazeEpisode(max_steps=200)
    episode.reset(data_idx)
    rng = random.Random(data_idx)
    cells = episode.maze.size**2
    seen, left = {episode.position}, set()
    while True:
        before = episode.position
        result = episode.step(episode.rule_action(rng) or "")
        assert not result.invalid
        if episode.position in seen and episode.position != before:
            left.add(before)  # stepped back: `before` is done with
        assert episode.position not in left
        seen.add(episode.position)
        if result.done:
            break
    assert result.score == 1.0 and episode._moves <= 2 * (cells - 1)


def test_maze_rule_beats_chance() -> None:
    rule, chance = _both("maze", "test", 16, every=3)
    assert rule["all"] > chance["all"] + 0.2, (rule, chance)


def test_textcraft_rule_crafts_first_and_beats_chance() -> None:
    options = {"menu": "numbers", "admissible": "true", "scaled": "true", "observation": "state"}
    rule, chance = _both("textcraft", "shallow_test", 8, every=3, **options)
    assert rule["all"] > chance["all"] + 0.1


def test_wordle_rule_guesses_only_words_that_fit_every_mark() -> None:
    env = WordleEnvironment()
    episode = env.new_episode()
    rng = random.Random(1)
    episode.reset(7)
    marks = []
    for _ in range(6):
        guess = episode.rule_action(rng)
        if guess is None:
            break
        assert all(feedback(g, guess) == m for g, m in marks)
        marks.append((guess, feedback(guess, episode.target)))
        if episode.step(guess).done:
            break
    rows = _rows("wordle", "test", every=20)
    rule = yardstick_success(env, rows, turn_cap=6, tries=1, policy="rule")
    chance = yardstick_success(env, rows, turn_cap=6, tries=1, policy="random")
    assert rule["all"] > chance["all"] + 0.3


def test_searchqa_rule_searches_the_question_then_answers_from_the_top_passage() -> None:
    env = load_env("searchqa", prompt="question", topk="3")
    episode = env.new_episode()
    rng = random.Random(0)
    try:
        episode.reset(5)
        first = episode.rule_action(rng)
        assert first is not None and first.startswith("<search> ") and "?" in first
        episode.step(first)
        second = episode.rule_action(rng)
        assert second is not None and second.startswith("<answer> ")
        episode.step(second)
        assert episode.rule_action(rng) != second  # an answer is not tried twice
    finally:
        episode.close()
        env.close()


def test_an_env_without_a_rule_declares_none_and_refuses_to_play_one() -> None:
    env = NoopEnvironment()
    assert NoopEnvironment.rule is None and not declares_rule(env)
    with pytest.raises(NotImplementedError):
        env.new_episode().rule_action(random.Random(0))
    with pytest.raises(ValueError, match="declares no scripted rule"):
        yardstick_success(env, [{"item_id": "noop_0", "category": "x"}], 2, 1, policy="rule")


@pytest.mark.process
def test_the_chance_tool_measures_the_rule(tmp_path) -> None:  # type: ignore[no-untyped-def]
    split = tmp_path / "split.json"
    rows = [r for r in _rows("babyai", "goto_test") if r["category"] == "GoToLocal"][:8]
    split.write_text(json.dumps(rows))
    run = [sys.executable, "-m", "agentgym_envs.chance", "--env", "babyai"]
    run += ["--env-option", "observation=compact", "--split", str(split), "--tries", "1"]
    out = subprocess.run([*run, "--policy", "rule"], capture_output=True, text=True, check=True)
    rates = dict(line.split() for line in out.stdout.splitlines())
    assert float(rates["GoToLocal"]) >= 0.75 and rates["all"] == rates["GoToLocal"]
