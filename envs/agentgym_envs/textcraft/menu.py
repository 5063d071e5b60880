"""A TextCraft task's menu (the `menu` env option): every action the task offers, listed, and the
short forms that name one. `numbers` numbers the lines and `3` does line 3; `names` lists them as
they are and `craft X` / `get X` do the listed line that crafts or gets X. Written actions stay
valid beside the short forms. An `admissible` menu lists, each turn, only the lines the inventory
can do then (every get; a craft once its ingredients are held), as TextWorld and ALFWorld list
their admissible commands, below the task's recipes; the short forms then name the lines shown."""

from __future__ import annotations

import random
import re
from collections import Counter

from agentgym_envs.textcraft.recipes import display, item_key

MENUS = ("off", "numbers", "names")
_NUMBER = re.compile(r"^(\d+)$")
_NAMED = re.compile(r"^(get|craft) ([^\d].*)$")  # 'craft stick', not 'craft 4 stick using ...'


class OffMenu(ValueError):
    """A short action that names no line of the menu; its message is the env's answer."""


class Menu:
    """The lines of one reset, shuffled by its seed."""

    def __init__(self, mode: str, lines: list[str], seed: str, admissible: bool = False) -> None:
        if mode not in MENUS[1:]:
            raise ValueError(f"menu must be one of {', '.join(MENUS)}, not {mode!r}")
        self.mode = mode
        self.lines = list(lines)
        self.admissible = admissible
        random.Random(seed).shuffle(self.lines)

    def shown(self, inventory: Counter[str]) -> list[str]:
        """The lines listed while the inventory holds this: all, or those it can do now."""
        if not self.admissible:
            return self.lines
        return [c for c in self.lines if c.startswith("get ") or makeable(c, inventory)]

    def text(self, inventory: Counter[str]) -> str:
        """The listing the observation shows; an admissible menu keeps every recipe above it,
        which says which gets lead to the goal."""
        shown = self.shown(inventory)
        if self.mode == "numbers":
            listing = "Actions:\n" + "\n".join(f"{i}. {a}" for i, a in enumerate(shown, 1))
        else:
            listing = "Actions:\n" + "\n".join(shown)
        if not self.admissible:
            return listing
        recipes = (c.removeprefix("craft ") for c in self.lines if c.startswith("craft "))
        return "Recipes:\n" + "\n".join(recipes) + "\n" + listing

    def expand(self, action: str, inventory: Counter[str]) -> str:
        """The shown line a short action names; any other action as it is. Raises OffMenu."""
        shown = self.shown(inventory)
        if self.mode == "numbers" and (m := _NUMBER.match(action)):
            if not 0 < int(m[1]) <= len(shown):
                raise OffMenu(f"No action {m[1]}: choose 1-{len(shown)}.")
            return shown[int(m[1]) - 1]
        if self.mode == "names" and (m := _NAMED.match(action.lower())):
            line = _named(shown, m[1], item_key(m[2]), inventory)
            if line is None:
                raise OffMenu(f"No listed action does {action!r}.")
            return line
        return action

    def random_action(self, rng: random.Random, inventory: Counter[str]) -> str:
        """A shown line, uniformly, in the short form."""
        shown = self.shown(inventory)
        if self.mode == "numbers":
            return str(rng.randint(1, len(shown)))
        line = rng.choice(shown)
        return f"{line.split(' ', 1)[0]} {display(_item_of(line))}"


def _named(shown: list[str], verb: str, item: str, inventory: Counter[str]) -> str | None:
    """The line `get X` or `craft X` names: of several, the largest get, or a craft the
    inventory can make (else the first listed)."""
    lines = [c for c in shown if c.startswith(verb) and _item_of(c) == item]
    if verb == "get":
        return max(lines, key=lambda c: int(c.split(" ", 2)[1]), default=None)
    doable = [c for c in lines if makeable(c, inventory)]
    return next(iter(doable or lines), None)


def _item_of(line: str) -> str:
    """The item a line gets or crafts: 'craft 4 stick using 8 bamboo' -> 'stick'."""
    return item_key(line.split(" using ", 1)[0].split(" ", 2)[2])


def makeable(craft: str, inventory: Counter[str]) -> bool:
    """Whether the inventory holds every ingredient of a listed craft."""
    parts = (p.split(" ", 1) for p in craft.split(" using ", 1)[1].split(", "))
    return all(inventory[item_key(i)] >= int(n) for n, i in parts)
