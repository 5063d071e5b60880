"""Text rendering of what the BabyAI agent sees.

minigrid has no text renderer: this reads the agent's 7x7 egocentric view (`gen_obs()["image"]`,
the agent at view cell (3, 6) facing up, occluded cells "unseen") and describes walls straight
ahead/left/right, visible objects relative to the agent, and the carried object. Objects are
labelled `<color> <type> <k>`, `k` counting objects of the same colour and type from the nearest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT

_AGENT_I, _AGENT_J = 3, 6
_OBJECTS = frozenset({"door", "key", "ball", "box", "goal", "lava"})
_DOOR_STATES = {0: "open", 1: "closed", 2: "locked"}


@dataclass(frozen=True, slots=True)
class Seen:
    """One visible object. `forward`/`right` are steps relative to the agent (right < 0: left)."""

    kind: str
    color: str
    state: str | None  # doors: "open" | "closed" | "locked"
    forward: int
    right: int
    pos: tuple[int, int]  # absolute grid position
    label: str  # "red ball 1", used by the actions


@dataclass(frozen=True, slots=True)
class View:
    """The parsed view: objects nearest first, and the distance to a wall in three directions."""

    objects: tuple[Seen, ...]
    walls: dict[str, int]  # "front"/"left"/"right" -> steps, only where a wall is seen


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def where(forward: int, right: int) -> str:
    """'3 steps in front of you and 1 step to your left'."""
    parts = []
    if forward:
        parts.append(f"{_steps(forward)} in front of you")
    if right:
        parts.append(f"{_steps(abs(right))} to your {'right' if right > 0 else 'left'}")
    return " and ".join(parts)


def scan(env: Any) -> View:
    """Parse the unwrapped minigrid env's current egocentric view."""
    image = env.gen_obs()["image"]
    fx, fy = (int(v) for v in env.dir_vec)
    rx, ry = -fy, fx
    ax, ay = (int(v) for v in env.agent_pos)
    found: list[tuple[int, int, int, str, str, str | None, tuple[int, int]]] = []
    for i in range(image.shape[0]):
        for j in range(image.shape[1]):
            if (i, j) == (_AGENT_I, _AGENT_J):
                continue  # the carried object is drawn on the agent's cell
            kind = IDX_TO_OBJECT[int(image[i, j, 0])]
            if kind not in _OBJECTS:
                continue
            fwd, rgt = _AGENT_J - j, i - _AGENT_I
            state = _DOOR_STATES.get(int(image[i, j, 2])) if kind == "door" else None
            pos = (ax + fwd * fx + rgt * rx, ay + fwd * fy + rgt * ry)
            color = IDX_TO_COLOR[int(image[i, j, 1])]
            found.append((fwd + abs(rgt), fwd, rgt, color, kind, state, pos))
    found.sort()
    counts: dict[tuple[str, str], int] = {}
    objects = []
    for _, fwd, rgt, color, kind, state, pos in found:
        k = counts[(color, kind)] = counts.get((color, kind), 0) + 1
        objects.append(Seen(kind, color, state, fwd, rgt, pos, f"{color} {kind} {k}"))

    walls: dict[str, int] = {}
    rays = {
        "front": [(_AGENT_I, j) for j in range(_AGENT_J - 1, -1, -1)],
        "left": [(i, _AGENT_J) for i in range(_AGENT_I - 1, -1, -1)],
        "right": [(i, _AGENT_J) for i in range(_AGENT_I + 1, image.shape[0])],
    }
    for direction, cells in rays.items():
        for dist, (i, j) in enumerate(cells, start=1):
            kind = IDX_TO_OBJECT[int(image[i, j, 0])]
            if kind in ("empty", "floor"):
                continue
            if kind == "wall":
                walls[direction] = dist
            break
    return View(tuple(objects), walls)


def describe_compact(view: View, carrying: Any) -> list[str]:
    """The same facts in few tokens: one line each for walls, objects (by action label, with
    `<forward>f <right>r` offsets; negative right = left) and what is carried."""
    walls = ", ".join(f"{d} {view.walls[d]}" for d in ("front", "left", "right") if d in view.walls)
    seen = "; ".join(
        f"{o.state + ' ' if o.state else ''}{o.label} {o.forward}f {o.right}r" for o in view.objects
    )
    held = f"{carrying.color} {carrying.type}" if carrying is not None else "nothing"
    return [f"Walls: {walls or 'none seen'}", f"Seen: {seen or 'nothing'}", f"Carrying: {held}"]


def describe(view: View, carrying: Any) -> list[str]:
    """Sentences for the walls, the visible objects and the carried object."""
    lines = []
    for direction, phrase in (
        ("front", "in front of you"),
        ("left", "to your left"),
        ("right", "to your right"),
    ):
        if direction in view.walls:
            lines.append(f"There is a wall {_steps(view.walls[direction])} {phrase}.")
    dupes = {(o.color, o.kind) for o in view.objects if not o.label.endswith(" 1")}
    for o in view.objects:
        adjective = f"{o.state} " if o.state else ""
        article = "an" if (adjective or o.color)[0] in "aeiou" else "a"
        name = f"{article} {adjective}{o.color} {o.kind}"
        if (o.color, o.kind) in dupes:
            name += f" ({o.label})"
        lines.append(f"You see {name} {where(o.forward, o.right)}.")
    if len(lines) == 0:
        lines.append("You see nothing but empty floor around you.")
    if carrying is not None:
        lines.append(f"You are carrying a {carrying.color} {carrying.type}.")
    else:
        lines.append("You are not carrying anything.")
    return lines
