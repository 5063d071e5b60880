"""BabyAI in-process: the expert bot's plans replayed through our text actions solve levels,
observations are deterministic per task id, bad actions and minigrid's stdout spam are handled."""

from __future__ import annotations

import json

import pytest
from minigrid.core.actions import Actions
from minigrid.utils.baby_ai_bot import BabyAIBot

from agentgym_envs.babyai.env import BabyAIEnvironment, BabyAIEpisode
from agentgym_envs.babyai.levels import CATEGORIES, LEVELS, level_for
from agentgym_envs.babyai.make_splits import DATA

_TEXT = {Actions.left: "turn left", Actions.right: "turn right", Actions.forward: "move forward"}
_TEXT |= {Actions.toggle: "toggle", Actions.drop: "drop"}
# The bot itself cannot solve KeyInBox (it asserts when the key is inside a box).
_BOT_IDS = [i for i in range(40, 80) if level_for(i)[0] != "BabyAI-KeyInBox-v0"]


def _bot_text(episode: BabyAIEpisode, action: int) -> str:
    if action == Actions.pickup:
        label = episode.label_at(tuple(episode.minigrid_env.front_pos))
        assert label is not None
        return f"pick up {label}"
    return _TEXT[Actions(action)]


def _replay_bot(data_idx: int, max_steps: int = 300) -> float:
    episode = BabyAIEpisode()
    episode.reset(data_idx)
    bot = BabyAIBot(episode.minigrid_env)
    for _ in range(max_steps):
        action = bot.replan()
        if action == Actions.done:
            break
        text = _bot_text(episode, action)
        assert text in episode.available_actions(), (data_idx, text)
        result = episode.step(text)
        if result.done:
            return result.score
    return 0.0


def test_bot_plans_replayed_through_text_actions_solve_levels() -> None:
    scores = {i: _replay_bot(i) for i in _BOT_IDS}
    assert all(s > 0 for s in scores.values()), {
        level_for(i)[0]: s for i, s in scores.items() if s <= 0
    }


@pytest.mark.parametrize(("data_idx", "verb"), [(9, "go to"), (14, "go to"), (71, "pick up")])
def test_one_high_level_action_solves_a_visible_target(data_idx: int, verb: str) -> None:
    episode = BabyAIEpisode()
    mission = episode.reset(data_idx).observation.split("\n", 1)[0]
    target = " ".join(mission.split()[-2:])  # "Your goal: pick up a grey box" -> "grey box"
    result = episode.step(f"{verb} {target} 1")
    assert result.done and 0 < result.reward == result.score


def test_observation_is_deterministic_per_task_id() -> None:
    first = {i: BabyAIEpisode().reset(i).observation for i in (0, 6, 23, 36, 4005)}
    episode = BabyAIEpisode()
    for i in (36, 4005, 0, 23, 6, 0):  # reuse one episode across levels, in another order
        assert episode.reset(i).observation == first[i]


def test_invalid_action_gives_a_message() -> None:
    episode = BabyAIEpisode()
    episode.reset(0)
    for bad in ("", "go to the moon", "pick up purple dragon 9", "turn  left twice"):
        result = episode.step(bad)
        assert result.observation.startswith("Invalid action") and not result.done
        assert result.invalid
    turned = episode.step("TURN LEFT.")  # normalized
    assert turned.observation.startswith("Your goal:") and not turned.invalid
    check = episode.step("check available actions")
    assert check.observation.startswith("Available actions: [") and not check.invalid


def test_sampling_rejected_spam_is_suppressed(capfd: pytest.CaptureFixture[str]) -> None:
    BabyAIEpisode().reset(8)  # BabyAI-GoToImpUnlock-v0 seed 0 rejects samples while generating
    assert "Sampling rejected" not in capfd.readouterr().out


def test_splits_and_categories() -> None:
    train = json.loads((DATA / "train.json").read_text())
    test = json.loads((DATA / "test.json").read_text())
    assert len(train) == 810 and len(test) == 90
    train_ids = {int(r["item_id"].removeprefix("babyai_")) for r in train}
    test_ids = {int(r["item_id"].removeprefix("babyai_")) for r in test}
    assert not train_ids & test_ids
    for row in test:
        assert (
            level_for(int(row["item_id"].removeprefix("babyai_")))[0] == CATEGORIES[row["category"]]
        )
    assert sorted(LEVELS) == list(LEVELS) and len(set(LEVELS)) == 40
    assert BabyAIEnvironment().info()["categories"] == CATEGORIES


def test_goto_splits_are_held_out_and_single_room_goto() -> None:
    files = ("train", "test", "goto_train", "goto_test")
    ids = {
        name: [int(r["item_id"].removeprefix("babyai_")) for r in json.loads(text)]
        for name in files
        for text in [(DATA / f"{name}.json").read_text()]
    }
    assert len(ids["goto_train"]) == 5000 and len(ids["goto_test"]) == 200
    held_out = set(ids["goto_test"])
    assert not held_out & (set(ids["goto_train"]) | set(ids["train"]) | set(ids["test"]))
    levels = {level_for(i)[0] for i in ids["goto_train"] + ids["goto_test"]}
    assert levels and all(level.startswith("BabyAI-GoTo") for level in levels)


def test_study_split_is_held_out_from_every_train_split() -> None:
    from agentgym_envs.babyai.make_splits import STUDY_LEVELS

    ids = {
        name: {int(r["item_id"].removeprefix("babyai_")) for r in json.loads(text)}
        for name in ("train", "goto_train", "study_train", "study_test")
        for text in [(DATA / f"{name}.json").read_text()]
    }
    assert len(ids["study_train"]) == 5000 and len(ids["study_test"]) == 75
    assert not ids["study_test"] & (ids["train"] | ids["goto_train"] | ids["study_train"])
    tested = sorted(level_for(i)[0] for i in ids["study_test"])
    assert tested == sorted(level for level in STUDY_LEVELS for _ in range(15))


def test_compact_observation_states_the_same_facts() -> None:
    from agentgym_envs import load_env

    verbose, compact = BabyAIEpisode(), load_env("babyai", observation="compact").new_episode()
    for data_idx in (9, 49, 6):  # GoToLocal, GoToLocal, GoTo (doors)
        long, short = verbose.reset(data_idx).observation, compact.reset(data_idx).observation
        assert len(short) < 0.7 * len(long)
        assert compact.available_actions() == verbose.available_actions()
        goal = long.splitlines()[0].removeprefix("Your goal: ")
        words = [w for w in goal.split() if w not in ("the", "a", "an")]
        assert short.splitlines()[0] == f"Goal: {' '.join(words)}"
        for label in (a.removeprefix("go to ") for a in verbose.available_actions()):
            if not label.startswith(("turn", "move", "check", "pick", "toggle", "drop", "go ")):
                assert label in short  # every object is named by its action label
        listed = short.splitlines()[-1].removeprefix("Actions: ").split(", ")
        assert listed == [a for a in verbose.available_actions() if a != "check available actions"]
    # GoToRedBall: the goal spells the label of the action that reaches the ball
    short = compact.reset(14).observation
    assert short.startswith("Goal: go to red ball\n")
    result = compact.step("go to no such thing")
    assert result.reward == 0.0 and not result.done and result.invalid
    assert result.observation == f"Invalid action: 'go to no such thing' is not available.\n{short}"
    with pytest.raises(ValueError, match="compact"):
        load_env("babyai", observation="tiny")
    with pytest.raises(ValueError, match="does not take options"):
        load_env("babyai", colour="red")
