"""The BabyAI ladder: each shipped held-out task sits in the cell its own replay gives (turns the
rule needs, objects told apart), the cells are full and held out from every training split, and
the distractor pair is GoToLocal's 3+ cells."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from agentgym_envs.babyai.env import BabyAIEnvironment, BabyAIEpisode
from agentgym_envs.babyai.ladder import MIN_CELL, bucket, cell_of
from agentgym_envs.babyai.levels import level_for

pytestmark = pytest.mark.unit


def _ids(split: str) -> list[int]:
    return [int(r["item_id"].split("_")[1]) for r in BabyAIEnvironment.tasks(split)]


def test_cells_are_full_and_a_sample_replays_into_its_cell() -> None:
    rows = BabyAIEnvironment.tasks("ladder_test")
    counts = Counter(r["category"] for r in rows)
    assert len(counts) >= 8 and min(counts.values()) >= MIN_CELL
    assert {c.split("-d")[0] for c in counts} == {"t1", "t2", "t3"}
    assert {c.split("-d")[1] for c in counts} == {"0", "1-2", "3+"}
    episode = BabyAIEpisode(compact=True)
    try:
        for row in rows[::37]:
            assert cell_of(episode, int(row["item_id"].split("_")[1])) == row["category"]
    finally:
        episode.close()


def test_a_one_turn_task_lists_its_goal_at_once() -> None:
    episode = BabyAIEpisode(compact=True)
    try:
        for row in [r for r in BabyAIEnvironment.tasks("ladder_test") if r["category"] == "t1-d3+"][
            :5
        ]:
            observation = episode.reset(int(row["item_id"].split("_")[1])).observation
            goal = observation.splitlines()[0].removeprefix("Goal: ")
            listed = observation.splitlines()[-1].removeprefix("Actions: ").split(", ")
            assert any(a.startswith(goal + " ") for a in listed)
            assert sum(a.startswith("go to ") for a in listed) >= 4  # the goal and 3+ others
    finally:
        episode.close()


def test_held_out_from_training_and_the_distractor_pair() -> None:
    test = set(_ids("ladder_test"))
    for split in ("goto_train", "study_train", "train", "distractor_train"):
        assert not test & set(_ids(split)), split
    assert set(_ids("distractor_test")) <= test
    for split in ("distractor_train", "distractor_test"):
        rows = BabyAIEnvironment.tasks(split)
        assert {r["category"].split("-d")[1] for r in rows} == {"3+"}
        assert {level_for(int(r["item_id"].split("_")[1]))[0] for r in rows} == {
            "BabyAI-GoToLocal-v0"
        }
    goals = set()
    episode = BabyAIEpisode(compact=True)
    try:
        for data_idx in _ids("distractor_train")[:300]:
            goals.add(episode.reset(data_idx).observation.splitlines()[0])
    finally:
        episode.close()
    assert len(goals) >= 16  # goals of every colour and type


def test_buckets() -> None:
    assert [bucket(n) for n in (0, 1, 2, 3, 7)] == ["0", "1-2", "1-2", "3+", "3+"]
    assert json.dumps(bucket(0)) == '"0"'


def test_maze_ladder_rungs_are_full_held_out_and_true_to_their_paths() -> None:
    from agentgym_envs.maze.env import MazeEnvironment
    from agentgym_envs.maze.layout import generate
    from agentgym_envs.maze.make_splits import LADDER_PER_RUNG, ladder_rows, rung

    rows = MazeEnvironment.tasks("ladder_test")
    assert rows == ladder_rows()  # the shipped file is what the generator writes
    counts = Counter(r["category"] for r in rows)
    assert counts == {c: LADDER_PER_RUNG for c in ("p1-2", "p3-4", "p5-8", "p9-16", "p17+")}
    for r in rows[::7]:
        path = generate(int(r["item_id"].split("_")[1])).shortest_path()
        assert path is not None and rung(len(path)) == r["category"]
    others = {t["item_id"] for s in ("train", "test") for t in MazeEnvironment.tasks(s)}
    assert not others & {r["item_id"] for r in rows}
