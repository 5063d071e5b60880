"""Maze: walk a generated grid maze from the start cell to the goal, seeing only nearby walls.

Task `data_idx` is the maze `layout.generate(data_idx)` makes: 5x5 to 7x7 cells, a perfect maze
(solvable, no loops), start and goal drawn from the id's seed. Task ids are unbounded
(`num_tasks` None): every non-negative id names a maze. Its category is the band of its shortest
path (`layout.band`): "short" (<= 4 moves), "medium" (5-8), "long" (> 8).

Observation: where you are, where the goal is and which directions are open, e.g.
`You are at (2, 3). The goal is at (4, 4), 2 down and 1 right of you. Open: up, left. Walls:
down, right.` (the offset is left out with `compass=false`, as AgentGym's maze; cells are
`(row, column)`, row 0 at the top), then the moves left. Actions: `move up|down|left|right` (a
bare `up` or `go up` too). A move into a wall, or anything else, is refused (`invalid`): no move,
and it does not count against the limit. Reaching the goal: reward 1, score 1, done. Option
`max_steps` (`--env-option max_steps=N`, default 50): after that many moves without reaching the
goal the episode ends with score 0.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from agentgym_envs.maze.layout import MAX_SIZE, MIN_SIZE, MOVES, Maze, generate, neighbour
from agentgym_envs.server.base import REACT_RULES, Environment, EnvOption, Episode, StepResult
from agentgym_envs.server.tools import Param, Tool

_PREFIXES = ("move ", "go ")


def parse_move(action: str) -> str:
    """`Move Up.`, `go up` and `up` all give `up` (anything else is returned normalized)."""
    text = " ".join(action.strip().strip("\"'`").rstrip(".").lower().split())
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            return text.removeprefix(prefix)
    return text


def _move(action: str) -> str:
    return action.removeprefix("move ")


def _cell(cell: tuple[int, int]) -> str:
    return f"({cell[0]}, {cell[1]})"


def _offset(here: tuple[int, int], there: tuple[int, int]) -> str:
    """Where `there` lies from `here`, as moves in a maze without walls: `2 down and 1 left`."""
    rows, cols = there[0] - here[0], there[1] - here[1]
    parts = [f"{abs(rows)} {'down' if rows > 0 else 'up'}"] if rows else []
    parts += [f"{abs(cols)} {'right' if cols > 0 else 'left'}"] if cols else []
    return " and ".join(parts)


class MazeEpisode(Episode):
    """The maze, the agent's cell and the moves made in one episode."""

    def __init__(self, max_steps: int, compass: bool = True) -> None:
        self._max_steps = max_steps
        self._compass = compass
        self._maze: Maze | None = None
        self._pos = (0, 0)
        self._moves = 0
        self._score = 0.0
        self._last = ""
        self._visited: set[tuple[int, int]] = set()
        self._trail: list[tuple[int, int]] = []
        """The cells from the start to here, without the dead ends left (the rule's memory)."""

    @property
    def maze(self) -> Maze:
        """The current maze (for tests and scripted players)."""
        assert self._maze is not None, "reset first"
        return self._maze

    @property
    def position(self) -> tuple[int, int]:
        return self._pos

    def reset(self, data_idx: int) -> StepResult:
        self._maze = generate(data_idx)
        self._pos = self._maze.start
        self._moves = 0
        self._score = 0.0
        self._visited, self._trail = {self._pos}, [self._pos]
        n = self._maze.size
        intro = (
            f"You are in a {n}x{n} maze. Cells are (row, column), from (0, 0) at the top left to "
            f"({n - 1}, {n - 1}) at the bottom right: up decreases the row, left the column. "
            "Reach the goal."
        )
        self._last = f"{intro}\n{self._where()}"
        return StepResult(self._last)

    def step(self, action: str) -> StepResult:
        if self._done:
            return StepResult("The episode is over.", 0.0, self._score, True, invalid=True)
        move = parse_move(action)
        if move not in MOVES:
            text = f"Unknown action {action.strip()!r}: use move up, down, left or right."
            return StepResult(f"{text}\n{self._where()}", 0.0, self._score, False, invalid=True)
        if move not in self.maze.open[self._pos]:
            text = f"You cannot move {move}: there is a wall."
            return StepResult(f"{text}\n{self._where()}", 0.0, self._score, False, invalid=True)
        self._pos = neighbour(self._pos, move)
        self._moves += 1
        self._remember(self._pos)
        if self._pos == self.maze.goal:
            self._score = 1.0
            self._last = f"You moved {move} and reached the goal in {self._moves} moves."
        elif self._moves >= self._max_steps:
            self._last = f"You moved {move}. You ran out of moves ({self._max_steps})."
        else:
            self._last = f"You moved {move}.\n{self._where()}"
        return StepResult(self._last, self._score, self._score, self._done)

    def observation(self) -> str:
        return self._last

    def available_actions(self) -> list[str]:
        if self._maze is None or self._done:
            return []
        return [f"move {m}" for m in MOVES if m in self.maze.open[self._pos]]

    def rule_action(self, rng: random.Random) -> str | None:
        """A depth-first search that reads the observation and remembers where it has been
        (what a policy reading its own history can do): an open move into a cell not visited
        yet, toward the goal when one is (of two, one at random); else back the way it came.
        It reaches every goal of a perfect maze, in at most twice the cells' count of moves.
        (Without memory, the greedy move toward the goal solved 0.45 of the test split at a
        cap of 16: a dead end that points at the goal traps it.)"""
        moves = self.available_actions()
        if not moves:
            return None
        fresh = [m for m in moves if neighbour(self._pos, _move(m)) not in self._visited]
        if not fresh:
            back = self._trail[-2] if len(self._trail) > 1 else None
            return next((m for m in moves if neighbour(self._pos, _move(m)) == back), moves[0])
        rows, cols = (g - p for g, p in zip(self.maze.goal, self._pos, strict=True))
        toward = {"down" if rows > 0 else "up"} if rows else set()
        toward |= {"right" if cols > 0 else "left"} if cols else set()
        closer = [m for m in fresh if _move(m) in toward]
        return rng.choice(closer or fresh)

    def _remember(self, cell: tuple[int, int]) -> None:
        self._visited.add(cell)
        if len(self._trail) > 1 and self._trail[-2] == cell:
            self._trail.pop()  # stepped back out of a dead end
        else:
            self._trail.append(cell)

    @property
    def _done(self) -> bool:
        return self._score > 0 or self._moves >= self._max_steps

    def _where(self) -> str:
        """Position, goal, open directions and walls around, moves left."""
        here = self.maze.open[self._pos]
        opened = ", ".join(m for m in MOVES if m in here) or "none"
        walls = ", ".join(m for m in MOVES if m not in here) or "none"
        left = self._max_steps - self._moves
        goal = f"The goal is at {_cell(self.maze.goal)}"
        if self._compass:
            goal += f", {_offset(self._pos, self.maze.goal)} of you"
        return (
            f"You are at {_cell(self._pos)}. {goal}. "
            f"Open: {opened}. Walls: {walls}. {left} move{'s' if left != 1 else ''} left."
        )


class MazeEnvironment(Environment):
    """Generated grid mazes; task ids are unbounded (every id seeds a maze)."""

    name: ClassVar[str] = "maze"
    # the same cell is the same state however many moves are left
    state_ignore: ClassVar[str | None] = r"\d+ moves? left\."
    rule: ClassVar[str | None] = (
        "depth-first search: an unvisited open cell, toward the goal first, else back"
    )
    description: ClassVar[str] = (
        "Grid mazes (5x5 to 7x7, generated from the task id): walk to the goal seeing only the "
        "walls around you"
    )
    system_prompt: ClassVar[str | None] = (
        "You walk through a grid maze to reach a goal cell. Each observation gives your cell and "
        "the goal's as (row, column), with row 0 at the top, and which directions around you are "
        "open or walled. Your action is one move: 'move up', 'move down', 'move left' or 'move "
        "right'; up decreases the row, left the column. Walls may force detours: remember where "
        "you have been. " + REACT_RULES
    )
    options: ClassVar[tuple[EnvOption, ...]] = (
        EnvOption("max_steps", int, 50, help="moves before the episode ends unsolved", minimum=1),
        EnvOption(
            "compass",
            bool,
            True,
            help="also say where the goal lies from you ('2 down and 1 left of you'); false: "
            "coordinates only, as AgentGym's maze",
        ),
    )
    tools: ClassVar[tuple[Tool, ...]] = (
        Tool(
            "move",
            "Move one cell; a wall refuses the move (it does not count).",
            "move {direction}",
            (Param("direction", "string", "Up decreases the row, left the column.", tuple(MOVES)),),
        ),
    )
    splits: ClassVar[dict[str, str | range]] = {
        "train": "data/train.json",
        "test": "data/test.json",
        "ladder_test": "data/ladder_test.json",  # by shortest path: 1-2 ... 17+ moves
    }

    def __init__(self, max_steps: int | str = 50, compass: bool | str = True) -> None:
        # Parsed here too: a caller that builds the class directly passes strings as well.
        self.max_steps: int = self.options[0].parse(self.name, max_steps)
        self.compass: bool = self.options[1].parse(self.name, compass)

    def new_episode(self) -> MazeEpisode:
        return MazeEpisode(self.max_steps, self.compass)

    def num_tasks(self) -> int | None:
        return None

    def info(self) -> dict[str, Any]:
        return {**super().info(), "max_steps": self.max_steps, "sizes": [MIN_SIZE, MAX_SIZE]}
