"""Maze layouts: task id -> a perfect maze (one path between any two cells), start and goal.

`generate(data_idx)` seeds `random.Random(f"maze-{data_idx}")`, so an id always gives the same
maze on any machine and Python version (string seeds are hashed with SHA-512). The maze is
`MIN_SIZE + data_idx % 3` cells square (5x5, 6x6, 7x7), carved by a randomized depth-first search
(recursive backtracker: every cell reachable, no loops); start and goal are two distinct cells
drawn from the same seed. Cells are `(row, column)`, row 0 at the top: "up" decreases the row.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

Cell = tuple[int, int]
MOVES: dict[str, Cell] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}
MIN_SIZE, MAX_SIZE = 5, 7
BANDS = ("short", "medium", "long")


def band(path_length: int) -> str:
    """The category of a shortest path of `path_length` moves: short <= 4 < medium <= 8 < long."""
    return "short" if path_length <= 4 else "medium" if path_length <= 8 else "long"


def neighbour(cell: Cell, move: str) -> Cell:
    dr, dc = MOVES[move]
    return cell[0] + dr, cell[1] + dc


@dataclass(frozen=True, slots=True)
class Maze:
    """A square maze: `open[cell]` is the set of moves from `cell` that no wall blocks."""

    size: int
    open: dict[Cell, frozenset[str]]
    start: Cell
    goal: Cell

    def shortest_path(self, start: Cell | None = None) -> list[str] | None:
        """The moves of a shortest path from `start` (default: the maze's) to the goal, by BFS;
        None when the goal cannot be reached (never, in a maze `generate` made)."""
        origin = self.start if start is None else start
        came: dict[Cell, tuple[Cell, str] | None] = {origin: None}
        queue = deque([origin])
        while queue:
            cell = queue.popleft()
            if cell == self.goal:
                return _moves_to(came, cell)
            for move in sorted(self.open[cell]):
                nxt = neighbour(cell, move)
                if nxt not in came:
                    came[nxt] = (cell, move)
                    queue.append(nxt)
        return None

    def category(self) -> str:
        path = self.shortest_path()
        assert path is not None, "a generated maze is connected"
        return band(len(path))


def _moves_to(came: dict[Cell, tuple[Cell, str] | None], cell: Cell) -> list[str]:
    moves: list[str] = []
    step = came[cell]
    while step is not None:
        cell, move = step
        moves.append(move)
        step = came[cell]
    return moves[::-1]


def generate(data_idx: int) -> Maze:
    """The maze of task `data_idx` (see the module docstring)."""
    rng = random.Random(f"maze-{data_idx}")
    size = MIN_SIZE + data_idx % (MAX_SIZE - MIN_SIZE + 1)
    passages: dict[Cell, set[str]] = {(r, c): set() for r in range(size) for c in range(size)}
    first = (rng.randrange(size), rng.randrange(size))
    stack, seen = [first], {first}
    while stack:
        cell = stack[-1]
        fresh = [m for m in MOVES if (n := neighbour(cell, m)) in passages and n not in seen]
        if not fresh:
            stack.pop()  # a dead end: back up to the last cell with an unvisited neighbour
            continue
        move = rng.choice(fresh)
        nxt = neighbour(cell, move)
        passages[cell].add(move)
        passages[nxt].add(OPPOSITE[move])
        seen.add(nxt)
        stack.append(nxt)
    start, goal = rng.sample(sorted(passages), 2)
    return Maze(size, {c: frozenset(m) for c, m in passages.items()}, start, goal)
