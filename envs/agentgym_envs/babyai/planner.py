"""BFS path planning over minigrid primitive moves.

Plans on the full grid (the true layout), over states (x, y, direction) with the actions turn
left, turn right and move forward, to a state facing a target cell. Cells are passable when empty
or overlappable (open doors, floor, goal); lava is avoided.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from minigrid.core.actions import Actions
from minigrid.core.constants import DIR_TO_VEC


def _passable(cell: Any) -> bool:
    return cell is None or (cell.can_overlap() and cell.type != "lava")


def plan_to_face(env: Any, target: tuple[int, int]) -> list[int] | None:
    """Shortest list of primitive actions after which the agent faces `target`, or None."""
    grid = env.grid
    start = (int(env.agent_pos[0]), int(env.agent_pos[1]), int(env.agent_dir))
    parents: dict[tuple[int, int, int], tuple[tuple[int, int, int], int] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        x, y, d = state
        dx, dy = DIR_TO_VEC[d]
        fx, fy = x + int(dx), y + int(dy)
        if (fx, fy) == target:
            actions: list[int] = []
            node = state
            while parents[node] is not None:
                node, action = parents[node]  # type: ignore[misc]
                actions.append(action)
            return actions[::-1]
        nexts = [
            ((x, y, (d - 1) % 4), int(Actions.left)),
            ((x, y, (d + 1) % 4), int(Actions.right)),
        ]
        if 0 <= fx < grid.width and 0 <= fy < grid.height and _passable(grid.get(fx, fy)):
            nexts.append(((fx, fy, d), int(Actions.forward)))
        for nxt, action in nexts:
            if nxt not in parents:
                parents[nxt] = (state, action)
                queue.append(nxt)
    return None
