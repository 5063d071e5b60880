"""The crafting graph of Minecraft 1.16.1, read from the `minecraft-data` package.

Every recipe variant in `recipes.json` becomes a `Recipe` (result, count, ingredient counts;
shaped recipes are counted cell by cell). An item is *gettable* (`get N item`) when no recipe
makes it, or when crafting alone cannot produce it but the world drops it (any block or entity
loot table: iron ingots from iron golems, wheat from crops, ...). Crafting depth is the length of
the shortest recipe chain from gettable items: depth(item) = 1 + max depth of the ingredients of
its best recipe. Items that stay unreachable (bread, cake, ...) are never goals.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import minecraft_data

VERSION = "1.16.1"


def data_dir() -> Path:
    """Where the package keeps the 1.16.1 Java-edition data."""
    return Path(minecraft_data.__file__).parent / "data" / "data" / "pc" / VERSION


@dataclass(frozen=True, slots=True)
class Recipe:
    """`count` of `result` from `ingredients` (item -> count), items by internal name."""

    result: str
    count: int
    ingredients: tuple[tuple[str, int], ...]  # sorted by item name

    def command(self) -> str:
        """'craft 4 oak planks using 1 oak log' (the line shown to the agent)."""
        parts = ", ".join(f"{n} {display(item)}" for item, n in self.ingredients)
        return f"craft {self.count} {display(self.result)} using {parts}"

    def times(self, k: int) -> Recipe:
        """The same recipe made `k` times in one craft: every count times `k`."""
        return Recipe(self.result, self.count * k, tuple((i, n * k) for i, n in self.ingredients))


def display(item: str) -> str:
    """'oak_planks' -> 'oak planks'."""
    return item.replace("_", " ")


def item_key(text: str) -> str:
    """'Oak Planks', 'oak_planks' and 'minecraft:oak_planks' all name 'oak_planks'."""
    text = text.strip().lower().removeprefix("minecraft:")
    return "_".join(text.replace("_", " ").split())


class CraftingGraph:
    """All recipes, gettable items and crafting depths."""

    def __init__(self, root: Path | None = None) -> None:
        root = root or data_dir()
        names = {
            int(i["id"]): str(i["name"]) for i in json.loads((root / "items.json").read_text())
        }
        recipes: dict[str, list[Recipe]] = {}
        seen: set[Recipe] = set()
        for variants in json.loads((root / "recipes.json").read_text()).values():
            for v in variants:
                cells = v.get("ingredients") or [x for row in v["inShape"] for x in row]
                counts = Counter(names[int(x)] for x in cells if x is not None)
                result = names[int(v["result"]["id"])]
                recipe = Recipe(result, int(v["result"]["count"]), tuple(sorted(counts.items())))
                if recipe not in seen:
                    seen.add(recipe)
                    recipes.setdefault(result, []).append(recipe)
        self.recipes = {
            k: sorted(v, key=lambda r: r.ingredients) for k, v in sorted(recipes.items())
        }
        uses = Counter(i for rs in self.recipes.values() for r in rs for i, _ in r.ingredients)
        gettable = {i for i in uses if i not in self.recipes}
        # Unreachable items the world drops become gettable one at a time, the most used first
        # (wheat before hay bales, gold ingots before nuggets), drops of other sources first.
        for pool in self._loot_items(root):
            while True:
                reachable = self._depths(gettable)
                open_items = [i for i in self.recipes if i not in reachable and i in pool]
                if not open_items:
                    break
                gettable.add(min(open_items, key=lambda i: (-uses[i], i)))
        self.gettable = frozenset(gettable)
        self._plans: dict[str, tuple[Recipe, ...]] = {}  # every reset asks for its goal's
        self.depth = self._depths(self.gettable)

    @staticmethod
    def _loot_items(root: Path) -> tuple[set[str], set[str]]:
        """(items dropped by a block or entity other than themselves, all dropped items)."""
        other: set[str] = set()
        every: set[str] = set()
        for table, key in (("blockLoot.json", "block"), ("entityLoot.json", "entity")):
            for source in json.loads((root / table).read_text()):
                for drop in source["drops"]:
                    every.add(str(drop["item"]))
                    if drop["item"] != source[key]:
                        other.add(str(drop["item"]))
        return other, every

    def _depths(self, base: set[str] | frozenset[str]) -> dict[str, int]:
        depth = dict.fromkeys(base, 0)
        changed = True
        while changed:  # Bellman-Ford style relaxation; the graph has cycles (ingot <-> block)
            changed = False
            for item, recipes in self.recipes.items():
                if item in base:
                    continue
                for r in recipes:
                    if all(i in depth for i, _ in r.ingredients):
                        d = 1 + max(depth[i] for i, _ in r.ingredients)
                        if d < depth.get(item, 1 << 30):
                            depth[item] = d
                            changed = True
        return depth

    def best_recipe(self, item: str) -> Recipe:
        """The recipe realising `item`'s minimum depth (fewest ingredient kinds, then by name)."""
        target = self.depth[item] - 1
        ok = [
            r
            for r in self.recipes[item]
            if all(i in self.depth for i, _ in r.ingredients)
            and max(self.depth[i] for i, _ in r.ingredients) == target
        ]
        return min(ok, key=lambda r: (len(r.ingredients), r.ingredients))

    def plan(self, goal: str) -> list[Recipe]:
        """The best recipes of every crafted item in `goal`'s tree, goal first, no repeats."""
        if goal not in self._plans:
            self._plans[goal] = tuple(self._walk(goal))
        return list(self._plans[goal])

    def _walk(self, goal: str) -> list[Recipe]:
        """`plan`, computed: a depth-first walk of the goal's best recipes."""
        out: list[Recipe] = []
        seen: set[str] = set()
        stack = [goal]
        while stack:
            item = stack.pop()
            if item in seen or item in self.gettable:
                continue
            seen.add(item)
            recipe = self.best_recipe(item)
            out.append(recipe)
            stack.extend(i for i, _ in reversed(recipe.ingredients))
        return out

    def scaled_plan(self, goal: str) -> list[Recipe]:
        """`plan(goal)` with each recipe made as many times as one `goal` needs of its result
        ('craft 4 stick using 8 bamboo' where the goal takes 4 sticks), same order."""
        plan = self.plan(goal)
        need = Counter({goal: 1})
        batches: dict[str, int] = {}
        # a best recipe's ingredients are shallower than its result: deepest first sees every
        # user of an item before the item itself
        for recipe in sorted(plan, key=lambda r: -self.depth[r.result]):
            k = batches[recipe.result] = -(-need[recipe.result] // recipe.count)
            for item, n in recipe.ingredients:
                need[item] += n * k
        return [r.times(batches[r.result]) for r in plan]

    @cached_property
    def goals(self) -> list[tuple[str, int]]:
        """Craftable, non-gettable items of depth 1-4, sorted by (depth, name)."""
        return sorted(
            (
                (item, d)
                for item, d in self.depth.items()
                if 1 <= d <= 4 and item not in self.gettable
            ),
            key=lambda x: (x[1], x[0]),
        )

    @cached_property
    def items(self) -> list[str]:
        """Every item a recipe makes or uses, sorted."""
        used = {i for r in self.all_recipes() for i, _ in r.ingredients}
        return sorted(used | set(self.recipes))

    def all_recipes(self) -> list[Recipe]:
        return [r for rs in self.recipes.values() for r in rs]
