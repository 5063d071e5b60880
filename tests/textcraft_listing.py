"""Reading a TextCraft observation the way a test checks it: the item names it shows."""

from __future__ import annotations

import re

# `4 stick`, `1 acacia log`: a count, then the name up to ` using`, a comma or the line's end
_COUNTED_NAME = re.compile(r"\d+ ([^,\n]+?)(?= using|,|\n|$)")


def item_names(observation: str) -> list[str]:
    """The item names of a TextCraft listing (recipes, commands or a menu) and of its goal, in
    order of appearance."""
    listing, goal = observation.rsplit("Goal: craft ", 1)
    return [*_COUNTED_NAME.findall(listing), goal.split(".")[0]]
