"""Maze in-process: every id gives the same perfect maze, its BFS path solves it, walls and
unknown actions are refused without a move, the step limit ends an unsolved episode, the
splits are disjoint and their categories are those of the mazes, options are checked."""

from __future__ import annotations

import random
import re
from collections import deque

import pytest

from agentgym_envs.maze.env import MazeEnvironment, MazeEpisode, parse_move
from agentgym_envs.maze.layout import BANDS, MOVES, OPPOSITE, Maze, band, generate, neighbour
from agentgym_envs.server.base import REACT_RULES, EnvError, ErrorCode, StepResult

pytestmark = pytest.mark.unit

_WHERE = re.compile(
    r"You are at \((\d+), (\d+)\)\. The goal is at \((\d+), (\d+)\)(?:, ([a-z0-9 ]+) of you)?\. "
    r"Open: ([a-z, ]+)\. Walls: ([a-z, ]+)\. (\d+) moves? left\.$"
)


def _where(observation: str) -> tuple[tuple[int, int], tuple[int, int], list[str], int]:
    """(position, goal, open moves, moves left) read back from an observation's last line."""
    m = _WHERE.search(observation.split("\n")[-1])
    assert m is not None, observation
    opened = [] if m[6] == "none" else m[6].split(", ")
    return (int(m[1]), int(m[2])), (int(m[3]), int(m[4])), opened, int(m[8])


def test_the_compass_says_where_the_goal_lies_and_can_be_turned_off() -> None:
    for data_idx in range(40):
        first = MazeEnvironment().new_episode().reset(data_idx).observation.split("\n")[-1]
        m = _WHERE.search(first)
        assert m is not None and m[5] is not None, first
        rows, cols = int(m[3]) - int(m[1]), int(m[4]) - int(m[2])
        said = dict(reversed(part.split(" ")) for part in m[5].split(" and "))
        assert int(said.get("down", 0)) - int(said.get("up", 0)) == rows
        assert int(said.get("right", 0)) - int(said.get("left", 0)) == cols
        plain = MazeEnvironment(compass="false").new_episode().reset(data_idx).observation
        assert " of you" not in plain and _WHERE.search(plain.split("\n")[-1])[5] is None


def _reachable(maze: Maze) -> set[tuple[int, int]]:
    seen, queue = {maze.start}, deque([maze.start])
    while queue:
        cell = queue.popleft()
        for move in maze.open[cell]:
            nxt = neighbour(cell, move)
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def test_every_maze_is_perfect_and_its_shortest_path_solves_it() -> None:
    for data_idx in range(500):
        _check_solvable(data_idx)


def _check_solvable(data_idx: int) -> None:
    maze = generate(data_idx)
    n = maze.size
    assert n == 5 + data_idx % 3
    cells = {(r, c) for r in range(n) for c in range(n)}
    assert set(maze.open) == cells and maze.start != maze.goal
    assert {maze.start, maze.goal} <= cells
    for cell, moves in maze.open.items():
        for move in moves:  # passages stay inside the grid and go both ways
            assert neighbour(cell, move) in cells
            assert OPPOSITE[move] in maze.open[neighbour(cell, move)]
    # Connected with exactly n*n - 1 passages: a spanning tree, so exactly one path anywhere.
    assert _reachable(maze) == cells
    assert sum(len(m) for m in maze.open.values()) == 2 * (n * n - 1)
    path = maze.shortest_path()
    assert path is not None and maze.category() == band(len(path)), data_idx

    episode = MazeEnvironment().new_episode()
    episode.reset(data_idx)
    results = [episode.step(f"move {m}") for m in path]
    assert all(not r.invalid for r in results)
    assert [r.done for r in results] == [False] * (len(path) - 1) + [True]
    assert (results[-1].reward, results[-1].score) == (1.0, 1.0)
    assert episode.position == maze.goal, data_idx


def test_same_id_same_maze_across_instances() -> None:
    for data_idx in (0, 1, 2, 77, 10**6):
        a, b = MazeEnvironment().new_episode(), MazeEnvironment().new_episode()
        assert a.reset(data_idx) == b.reset(data_idx)
        assert a.maze == b.maze == generate(data_idx)
    assert generate(0) != generate(3)  # same size, another maze


def test_observation_states_position_goal_and_walls() -> None:
    episode = MazeEnvironment().new_episode()
    first = episode.reset(42)
    maze = episode.maze
    pos, goal, opened, left = _where(first.observation)
    assert (pos, goal, left) == (maze.start, maze.goal, 50)
    assert set(opened) == set(maze.open[maze.start])
    assert episode.available_actions() == [f"move {m}" for m in opened]
    assert f"{maze.size}x{maze.size} maze" in first.observation


def test_walls_and_unknown_actions_are_refused_without_a_move() -> None:
    episode = MazeEnvironment().new_episode()
    # A start cell with a wall (a perfect maze on 25+ cells has dead ends; find one quickly).
    data_idx = next(i for i in range(100) if len(generate(i).open[generate(i).start]) < 4)
    episode.reset(data_idx)
    maze = episode.maze
    blocked = [m for m in MOVES if m not in maze.open[maze.start]]
    for action in [f"move {m}" for m in blocked] + [*blocked, "jump", "move north", ""]:
        r = episode.step(action)
        assert r.invalid and r.reward == 0 and not r.done, action
        assert _where(r.observation)[0] == maze.start
        assert _where(r.observation)[3] == 50  # refused actions use up no move
    assert "there is a wall" in episode.step(f"move {blocked[0]}").observation
    assert "Unknown action 'jump'" in episode.step("jump").observation


def test_random_walks_move_only_through_open_sides() -> None:
    rng = random.Random(0)
    episode: MazeEpisode = MazeEnvironment().new_episode()
    for data_idx in range(30):
        result = episode.reset(data_idx)
        while not result.done:
            action = episode.random_action(rng)
            assert action is not None and action in episode.available_actions()
            before = episode.position
            result = episode.step(action)
            assert not result.invalid
            assert episode.position == neighbour(before, action.removeprefix("move "))
        assert episode.random_action(rng) is None and episode.available_actions() == []


def test_the_step_limit_ends_an_unsolved_episode() -> None:
    rng = random.Random(2)
    for data_idx in range(200):
        path = generate(data_idx).shortest_path()
        assert path is not None
        if len(path) < 3:
            continue
        # Fewer moves than the shortest path: no walk can reach the goal in time.
        limit = len(path) - 1
        episode = MazeEnvironment(max_steps=str(limit)).new_episode()
        episode.reset(data_idx)
        results: list[StepResult] = []
        while not (results and results[-1].done):
            action = episode.random_action(rng)
            assert action is not None
            results.append(episode.step(action))
        assert len(results) == limit
        assert all(r.score == 0 and r.reward == 0 for r in results)
        assert "ran out of moves" in results[-1].observation


@pytest.mark.parametrize(
    ("action", "move"),
    [
        ("move up", "up"),
        ("Move Up.", "up"),
        ("go left", "left"),
        ("  right ", "right"),
        ("'down'", "down"),
        ("move  north", "north"),  # not a move: refused by the episode, not here
    ],
)
def test_move_parsing(action: str, move: str) -> None:
    assert parse_move(action) == move


def test_splits_are_disjoint_and_categories_are_the_mazes() -> None:
    ids = {}
    for split in ("train", "test"):
        rows = MazeEnvironment.tasks(split)
        assert all(set(r) == {"item_id", "category"} for r in rows)
        assert all(r["item_id"].startswith("maze_") for r in rows)
        ids[split] = [int(r["item_id"].removeprefix("maze_")) for r in rows]
        assert len(set(ids[split])) == len(rows)
        # Pins the generator: a change to it would silently relabel the split files.
        assert all(
            r["category"] == generate(i).category() for r, i in zip(rows, ids[split], strict=True)
        )
        assert {r["category"] for r in rows} == set(BANDS)
    assert not set(ids["train"]) & set(ids["test"])
    test_bands = [r["category"] for r in MazeEnvironment.tasks("test")]
    assert all(test_bands.count(b) == 50 for b in BANDS)


def test_task_ids_are_unbounded_but_not_negative() -> None:
    env = MazeEnvironment()
    assert env.num_tasks() is None
    env.check_data_idx(0)
    env.check_data_idx(10**9)
    with pytest.raises(EnvError) as caught:
        env.check_data_idx(-1)
    assert caught.value.code is ErrorCode.BAD_DATA_IDX


def test_max_steps_option() -> None:
    option, compass = MazeEnvironment.options
    assert option.name == "max_steps" and option.default == 50 and compass.default is True
    assert option.parse("maze", "7") == 7
    for bad, message in (("0", "must be >= 1"), ("-3", "must be >= 1"), ("lots", "expected int")):
        with pytest.raises(ValueError, match=f"maze option max_steps='{bad}': {message}"):
            option.parse("maze", bad)
    with pytest.raises(ValueError, match="must be >= 1"):
        MazeEnvironment(max_steps="0")
    assert MazeEnvironment(max_steps="9").info()["max_steps"] == 9


def test_declarations() -> None:
    assert MazeEnvironment.name == "maze" and MazeEnvironment.action_format == "react"
    assert MazeEnvironment.description and "\n" not in MazeEnvironment.description
    assert MazeEnvironment.system_prompt is not None
    assert MazeEnvironment.system_prompt.endswith(REACT_RULES)
    assert MazeEnvironment.split_names() == ["train", "test", "ladder_test"]
