"""A random renaming of TextCraft's items (the `rename` env option): one episode is played with
every item name swapped for another item's, consistently in what it shows and what it reads, so
that a policy cannot learn which items a training goal wants and must read them off the listing.
Names are whole matches (`oak planks` is never the `oak` of `oak planks`); the renaming is a
permutation of all item names, so any name a policy writes maps back to exactly one item."""

from __future__ import annotations

import random
import re
from functools import cache


class Renaming:
    """One permutation of the item names, drawn from `seed`."""

    def __init__(self, names: list[str], seed: str) -> None:
        aliases = list(names)
        random.Random(seed).shuffle(aliases)
        self._shown = dict(zip(names, aliases, strict=True))
        self._real = dict(zip(aliases, names, strict=True))
        self._pattern = _whole_names(tuple(names))

    def show(self, text: str) -> str:
        """`text` as the policy sees it: each item under its alias."""
        return self._pattern.sub(lambda m: self._shown[m[0].lower()], text)

    def read(self, text: str) -> str:
        """A policy's `text` as the env takes it: each alias back to its item."""
        return self._pattern.sub(lambda m: self._real[m[0].lower()], text)


class Renamer:
    """Draws each reset's renaming of one env: none for the tasks in `keep` (the held-out
    goals), else a permutation seeded by task and draw."""

    def __init__(self, names: list[str], keep: frozenset[int]) -> None:
        self._names = names
        self._keep = keep

    def draw(self, data_idx: int, draw: int) -> Renaming | None:
        if data_idx in self._keep:
            return None
        return Renaming(self._names, f"textcraft-rename-{data_idx}-{draw}")


@cache
def _whole_names(names: tuple[str, ...]) -> re.Pattern[str]:
    """Any of `names` standing alone, longest first, so that a name inside a longer one is not
    matched on its own. Compiled once per process."""
    ordered = sorted(names, key=len, reverse=True)
    return re.compile(
        r"(?<![\w])(?:" + "|".join(map(re.escape, ordered)) + r")(?![\w])", re.IGNORECASE
    )
