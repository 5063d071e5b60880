"""TextCraft: craft a Minecraft item from gettable base items with text commands.

Task `data_idx` is goal `goals.json[data_idx]` (sorted by depth then name, written by
make_data.py, checked against the recipe data at start-up). Reset shows the crafting commands the
goal needs plus up to 10 distractor recipes (the `distractors` option: fewer for small policies),
shuffled by a per-task seed, then `Goal: craft X.` Each step answers with its message only, as the
reference does; `observation=state` (for small policies, whose context reaches back poorly) adds
after it the crafting commands again, the inventory and the goal, and names items in messages as
the commands do ('oak planks', not 'minecraft:oak_planks').
Actions: `get N item`, `craft N X using N a, N b`, `inventory`. Reward 1 when the goal is
crafted, which ends the episode. With `redraw`, each reset lists its own draw of distractors
in its own order (a task id then fixes the goal only); with `scaled`, the needed recipes are
listed at the counts the goal needs, so no count is multiplied. With a `menu`, the listing is
every action the task offers (its crafting commands and the gets of their gettable ingredients,
shuffled), as environments that list their admissible actions do, and an action may name a line
shortly: `menu=numbers` numbers the lines and `3` does what line 3 says; `menu=names` takes
`craft X` and `get X` for the listed line that crafts or gets X; an action the state cannot do
(a craft short of an ingredient) is then unavailable, an invalid turn, as BabyAI's. With
`admissible`, the menu lists only the lines the inventory can do at that turn, below the
task's recipes. With `rename` (training small policies), a goal outside the test split is played
with every item name swapped by a random permutation (`renaming.py`), so that a policy reads
which items its goal wants instead of learning them per goal; held-out goals keep their names.
With `progress_credit` c > 0 (training small policies; 0 as the reference), an episode not yet
successful scores -c x (1 - the share of the goal's intermediate items crafted so far) instead of
0: failures are ranked by how far they got, and success stays exactly `score > 0`. A random action (`random_action`) is a
crafting command the reset observation lists, a get of a gettable ingredient they list (with its
listed count) or `inventory`; with a `menu`, a line of the menu, in the menu's short form.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from agentgym_envs.server.base import REACT_RULES, Environment, EnvOption, Episode, StepResult
from agentgym_envs.server.tools import Param, Tool
from agentgym_envs.textcraft.menu import MENUS, Menu, OffMenu, makeable
from agentgym_envs.textcraft.recipes import CraftingGraph, Recipe, display, item_key
from agentgym_envs.textcraft.renaming import Renamer, Renaming

DATA = Path(__file__).parent / "data"
MAX_DISTRACTORS = 10
MAX_COUNT = 10_000
ACTIONS = ["get <count> <item>", "craft <count> <item> using <count> <item>, ...", "inventory"]
_GET = re.compile(r"^get (\d+) (.+)$")
_CRAFT = re.compile(r"^craft (\d+) (.+?) using (.+)$")
_PART = re.compile(r"^(\d+) (.+)$")


@cache
def load() -> tuple[CraftingGraph, tuple[tuple[str, int], ...]]:
    """The crafting graph and the pinned goal list (one shared copy per process)."""
    graph = CraftingGraph()
    goals = tuple(
        (g["item"], int(g["depth"])) for g in json.loads((DATA / "goals.json").read_text())
    )
    if list(goals) != graph.goals:
        raise RuntimeError(
            "textcraft data/goals.json does not match the recipe data: rerun make_data.py"
        )
    return graph, goals


def task_text(
    graph: CraftingGraph,
    goal: str,
    data_idx: int,
    distractors: int = MAX_DISTRACTORS,
    draw: int = 0,
    scaled: bool = False,
) -> str:
    """The reset observation of a task: needed + distractor commands, shuffled, then the goal.
    Fewer `distractors` keep a prefix of the same draw: the first k of the ten. `draw` 0 is the
    task's own draw; another number draws the distractors and the order anew. `scaled` lists the
    needed recipes at the counts the goal needs (`CraftingGraph.scaled_plan`); the draw and the
    order are the same."""
    rng = random.Random(f"textcraft-{data_idx}" + (f"-{draw}" if draw else ""))
    skip = set(graph.plan(goal))
    pool = [r for r in graph.all_recipes() if r not in skip and r.result != goal]
    drawn = rng.sample(pool, min(MAX_DISTRACTORS, len(pool)))
    needed = graph.scaled_plan(goal) if scaled else graph.plan(goal)
    commands = needed + drawn[:distractors]
    rng.shuffle(commands)
    lines = "\n".join(r.command() for r in commands)
    return f"Crafting commands:\n{lines}\n\nGoal: craft {display(goal)}."


class TextCraftEpisode(Episode):
    """Inventory and goal of one crafting task."""

    def __init__(
        self,
        graph: CraftingGraph,
        goals: tuple[tuple[str, int], ...],
        distractors: int = MAX_DISTRACTORS,
        state: bool = False,
        progress_credit: float = 0.0,
        draws: Iterator[int] | None = None,
        scaled: bool = False,
        menu: str = "off",
        admissible: bool = False,
        renamer: Renamer | None = None,
    ) -> None:
        self._graph = graph
        self._goals = goals
        self._distractors = distractors
        self._state = state  # restate commands, inventory and goal after every step
        self._credit = progress_credit
        # which draw of distractors and order each reset lists (0: the task's own)
        self._draws = draws or itertools.repeat(0)
        self._scaled = scaled  # needed recipes listed at the counts the goal needs
        self._intermediates: set[str] = set()  # the items the goal's plan crafts before it
        self._crafted: set[str] = set()  # items crafted so far
        self._goal = ""
        self._inventory: Counter[str] = Counter()
        self._last = ""
        self._score = 0.0
        self._listed: list[str] = []  # the crafting commands the reset observation lists
        self._gets: list[str] = []  # their gettable ingredients, as listed ("2 iron ingot")
        self._menu_mode = menu  # off, or how a short action names a line of the menu
        self._menu: Menu | None = None  # this reset's menu
        self._admissible = admissible  # the menu lists only what the inventory can do now
        self._renamer = renamer  # draws each reset's renaming of the items (`rename`)
        self._renaming: Renaming | None = None  # this reset's, or None: real names

    def reset(self, data_idx: int) -> StepResult:
        self._goal = self._goals[data_idx][0]
        self._inventory = Counter()
        self._score = -self._credit  # nothing crafted yet
        self._intermediates = {r.result for r in self._graph.plan(self._goal)} - {self._goal}
        self._crafted = set()
        draw = next(self._draws)
        self._last = task_text(
            self._graph, self._goal, data_idx, self._distractors, draw, self._scaled
        )
        self._listing = self._last.split("\n\n")[0]  # "Crafting commands:" and its lines
        self._listed = [line for line in self._last.split("\n") if line.startswith("craft ")]
        parts = (p for line in self._listed for p in line.split(" using ", 1)[1].split(", "))
        self._gets = [
            p for p in dict.fromkeys(parts) if item_key(p.split(" ", 1)[1]) in self._graph.gettable
        ]
        if self._menu_mode != "off":  # the listing becomes the menu: crafts and gets
            lines = self._listed + [f"get {g}" for g in self._gets]
            seed = f"textcraft-menu-{data_idx}-{draw}"
            self._menu = Menu(self._menu_mode, lines, seed, self._admissible)
            self._last = f"{self._menu.text(self._inventory)}\n\nGoal: craft {display(self._goal)}."
        self._renaming = self._renamer.draw(data_idx, draw) if self._renamer else None
        return StepResult(self.observation(), score=self._score)

    def step(self, action: str) -> StepResult:
        if self._renaming is not None:
            action = self._renaming.read(action)
        text = " ".join(action.strip().rstrip(".").split())
        if self._menu is not None:
            try:
                text = self._menu.expand(text, self._inventory)
            except OffMenu as refused:
                return self._answer(str(refused), True)
        lowered = text.lower()
        invalid = False
        held = +self._inventory
        if lowered == "inventory":
            self._last = self._inventory_text()
        elif m := _GET.match(lowered):
            self._last = self._get(int(m[1]), item_key(m[2]))
        elif m := _CRAFT.match(lowered):
            self._last = self._craft(int(m[1]), item_key(m[2]), m[3])
        else:
            invalid = True
            self._last = (
                f"Could not execute {text!r}. Use 'get N item', "
                "'craft N item using N ingredient, N ingredient' or 'inventory'."
            )
        if self._menu is not None and lowered != "inventory" and +self._inventory == held:
            invalid = True  # with a menu, an action the state cannot do yet is unavailable
        return self._answer(self._last, invalid)

    def _answer(self, message: str, invalid: bool) -> StepResult:
        """The step's result: the goal's reward (or progress credit) and, in state mode, the state."""
        self._last = message
        reward = 0.0
        if self._score <= 0 and self._inventory[self._goal] > 0:
            reward, self._score = 1.0 - self._score, 1.0
        elif self._score <= 0 and self._credit > 0:
            before, self._score = self._score, -self._credit * (1.0 - self._progress())
            reward = self._score - before
        if self._state and self._score <= 0:
            self._last = f"{self._last}\n{self._state_text()}"
        return StepResult(self.observation(), reward, self._score, self._score > 0, invalid)

    def _progress(self) -> float:
        """The share of the goal's intermediate items crafted so far (0 for depth 1)."""
        if not self._intermediates:
            return 0.0
        return len(self._intermediates & self._crafted) / len(self._intermediates)

    def observation(self) -> str:
        return self._last if self._renaming is None else self._renaming.show(self._last)

    def available_actions(self) -> list[str]:
        return list(ACTIONS)

    def random_action(self, rng: random.Random) -> str | None:
        """A listed crafting command or a get of one of their gettable ingredients (each
        9 times in 20), else `inventory`; with a menu, one of its lines in the short form. None
        before a reset and once the goal is crafted."""
        if not self._goal or self._score > 0:
            return None
        action = self._random_action(rng)
        return action if self._renaming is None else self._renaming.show(action)

    def rule_action(self, rng: random.Random) -> str | None:
        """A listed crafting command whose ingredients are all held (of several, one at
        random), else a get of one of their ingredients, at random; written in full, which a
        menu accepts beside its short forms. None before a reset and once the goal is crafted."""
        if not self._goal or self._score > 0:
            return None
        crafts = [c for c in self._listed if makeable(c, self._inventory)]
        if crafts or not self._gets:
            action = rng.choice(crafts) if crafts else "inventory"
        else:
            action = f"get {rng.choice(self._gets)}"
        return action if self._renaming is None else self._renaming.show(action)

    def _random_action(self, rng: random.Random) -> str:
        if self._menu is not None:
            return self._menu.random_action(rng, self._inventory)
        draw = rng.random()
        if draw < 0.45 and self._listed:
            return rng.choice(self._listed)
        if draw < 0.9 and self._gets:
            return f"get {rng.choice(self._gets)}"
        return "inventory"

    # -- actions ---------------------------------------------------------------------------------
    def _held(self) -> list[tuple[str, int]]:
        return sorted((+self._inventory).items())

    def _state_text(self) -> str:
        held = ", ".join(f"{n} {display(k)}" for k, n in self._held()) or "nothing"
        listing = self._listing if self._menu is None else self._menu.text(self._inventory)
        return f"{listing}\nInventory: {held}\nGoal: craft {display(self._goal)}."

    def _name(self, item: str) -> str:
        """An item as the messages name it: the reference's 'minecraft:oak_planks', or with
        `observation=state` 'oak planks', as the listed commands and the actions write it (a
        missing ingredient is then copied straight into the `get` that fetches it)."""
        return display(item) if self._state else f"minecraft:{item}"

    def _inventory_text(self) -> str:
        if not +self._inventory:
            return "Inventory: You are not carrying anything."
        if self._state:
            return "Inventory: " + ", ".join(f"{n} {display(k)}" for k, n in self._held())
        return "Inventory: " + " ".join(f"[minecraft:{k}] ({n})" for k, n in self._held())

    def _get(self, n: int, item: str) -> str:
        if item not in self._graph.gettable:
            return f"Could not find {display(item)}"
        if not 0 < n <= MAX_COUNT:
            return f"Could not get {n} {display(item)}: the count must be 1-{MAX_COUNT}"
        self._inventory[item] += n
        return f"Got {n} {display(item)}"

    def _craft(self, n: int, target: str, ingredients_text: str) -> str:
        given: Counter[str] = Counter()
        for part in ingredients_text.split(","):
            m = _PART.match(part.strip())
            if m is None:
                return f"Could not parse the ingredient {part.strip()!r}: write it as 'N item'"
            given[item_key(m[2])] += int(m[1])
        recipe = self._match(n, target, given)
        if recipe is None:
            return f"Could not find a valid recipe for {n} {display(target)} using the given items"
        missing = [
            f"{k - self._inventory[i]} {self._name(i)}"
            for i, k in given.items()
            if self._inventory[i] < k
        ]
        if missing:
            return (
                f"Could not find enough items to craft {self._name(target)} "
                f"(missing {', '.join(missing)})"
            )
        self._inventory -= given
        self._inventory[target] += n
        self._crafted.add(target)
        return f"Crafted {n} {self._name(target)}"

    def _match(self, n: int, target: str, given: Counter[str]) -> Recipe | None:
        if not 0 < n <= MAX_COUNT:
            return None
        for recipe in self._graph.recipes.get(target, []):
            if n % recipe.count:
                continue
            k = n // recipe.count
            if given == Counter({i: c * k for i, c in recipe.ingredients}):
                return recipe
        return None


class TextCraftEnvironment(Environment):
    """Goals of depth 1-4; task ids are `[0, len(goals))`."""

    name: ClassVar[str] = "textcraft"
    rule: ClassVar[str | None] = "craft-first: a listed craft the inventory can make, else a get"
    description: ClassVar[str] = "Crafting Minecraft 1.16.1 items from real recipes, goal depth 1-4"
    system_prompt: ClassVar[str | None] = (
        "You craft Minecraft items. Use 'get N item' to fetch base items, 'craft N X using N a, "
        "N b' to follow a listed recipe and 'inventory' to list what you hold. Reach the goal "
        "item. " + REACT_RULES
    )
    tools: ClassVar[tuple[Tool, ...]] = (
        Tool(
            "get",
            "Fetch a base item (one that no recipe makes) into your inventory.",
            "get {item}",
            (Param("item", "string", "Count and name, e.g. '1 oak log'."),),
        ),
        Tool(
            "craft",
            "Craft an item following one of the listed crafting commands; the ingredients must "
            "be in your inventory.",
            "craft {target} using {ingredients}",
            (
                Param("target", "string", "Count and name of the item made, e.g. '4 oak planks'."),
                Param(
                    "ingredients",
                    "string",
                    "Count and name of each ingredient, comma-separated, as the recipe lists "
                    "them, e.g. '1 oak log' or '2 iron ingot, 1 stick'.",
                ),
            ),
        ),
        Tool("inventory", "List the items you hold.", "inventory"),
    )
    options: ClassVar[tuple[EnvOption, ...]] = (
        EnvOption(
            "observation",
            default="reference",
            choices=("reference", "state"),
            help="state: every step also restates the commands, inventory and goal, and messages "
            "name items as the commands do (small policies); reference: the step's message only, "
            "as AgentGym's server",
        ),
        EnvOption(
            "distractors",
            type=int,
            default=MAX_DISTRACTORS,
            minimum=0,
            help=f"unneeded recipes listed with the needed ones (at most {MAX_DISTRACTORS})",
        ),
        EnvOption(
            "progress_credit",
            type=float,
            default=0.0,
            minimum=0.0,
            help="c in [0, 1): until its goal is crafted an episode scores -c x (1 - the share "
            "of the goal's intermediate items crafted), not 0; success stays score > 0",
        ),
        EnvOption(
            "redraw",
            type=bool,
            default=False,
            help="each episode lists its own draw of distractors in its own order, not the "
            "task's fixed one: a policy must read the listing, not recall the task's",
        ),
        EnvOption(
            "scaled",
            type=bool,
            default=False,
            help="needed recipes are listed at the counts the goal needs ('craft 4 stick using 8 "
            "bamboo' for a goal taking 4 sticks, not 'craft 1 stick using 2 bamboo'): every "
            "count the task asks for is read off the listing, none multiplied",
        ),
        EnvOption(
            "menu",
            default="off",
            choices=MENUS,
            help="the listing shows every action the task offers (its crafts and the gets of "
            "their gettable ingredients), and an action may name a line shortly: numbers: '3' "
            "does line 3; names: 'craft X' / 'get X' does the listed line for X (small policies)",
        ),
        EnvOption(
            "admissible",
            type=bool,
            default=False,
            help="with a menu, each turn lists only the actions the inventory can do then (every "
            "get; a craft once its ingredients are held), as TextWorld and ALFWorld list their "
            "admissible commands",
        ),
        EnvOption(
            "rename",
            type=bool,
            default=False,
            help="with observation=state, every task outside the test split is played with the "
            "item names swapped by a random permutation (its own each reset with redraw): a "
            "policy must read which items a goal wants off the listing, not learn them per "
            "goal; held-out goals keep theirs",
        ),
    )
    splits: ClassVar[dict[str, str | range]] = {
        "train": "data/train.json",
        "test": "data/test.json",
        "shallow_train": "data/shallow_train.json",
        "shallow_test": "data/shallow_test.json",
    }
    create_resets: ClassVar[bool] = True

    def __init__(
        self,
        observation: str = "reference",
        distractors: int = MAX_DISTRACTORS,
        progress_credit: float = 0.0,
        redraw: bool = False,
        scaled: bool = False,
        menu: str = "off",
        admissible: bool = False,
        rename: bool = False,
    ) -> None:
        if observation not in ("reference", "state"):
            raise ValueError(f"observation must be 'reference' or 'state', not {observation!r}")
        if not 0 <= distractors <= MAX_DISTRACTORS:
            raise ValueError(f"distractors must be 0-{MAX_DISTRACTORS}, not {distractors}")
        if not 0.0 <= progress_credit < 1.0:
            raise ValueError(f"progress_credit must be in [0, 1), not {progress_credit}")
        if menu not in MENUS:
            raise ValueError(f"menu must be one of {', '.join(MENUS)}, not {menu!r}")
        if menu != "off" and not scaled:
            # a menu lists each recipe at one count, so a goal taking 4 sticks from a recipe
            # making 1 would need 4 crafts and 4 gets: most depth-2 goals beyond the turn cap
            raise ValueError(
                f"menu={menu} needs scaled=true: the menu lists each action at one count"
            )
        if admissible and menu == "off":
            raise ValueError("admissible=true needs a menu (menu=numbers or menu=names)")
        if rename and observation != "state":
            # the reference's messages write item keys ('minecraft:oak_planks'), not the names
            # a renaming swaps: they would give the real items away
            raise ValueError("rename=true needs observation=state")
        self.state = observation == "state"
        self.distractors = distractors
        self.progress_credit = progress_credit
        self._draws = itertools.count(1) if redraw else itertools.repeat(0)
        self.scaled = scaled
        self.menu = menu
        self.admissible = admissible
        self.graph, self.goals = load()
        self.renamer = self._renamer() if rename else None

    def _renamer(self) -> Renamer:
        """`rename`'s draws over every item name; held-out goals (the test split) keep theirs."""
        held_out = frozenset(int(t["item_id"].rsplit("_", 1)[1]) for t in self.tasks("test"))
        return Renamer(list(self.lexicon()), held_out)

    def new_episode(self) -> TextCraftEpisode:
        return TextCraftEpisode(
            self.graph,
            self.goals,
            self.distractors,
            self.state,
            self.progress_credit,
            self._draws,
            self.scaled,
            self.menu,
            self.admissible,
            self.renamer,
        )

    def num_tasks(self) -> int | None:
        return len(self.goals)

    def lexicon(self) -> Iterable[str]:
        """Every item name as the observations write it ('oak planks')."""
        return [display(item) for item in self.graph.items]

    def info(self) -> dict[str, Any]:
        depths = Counter(d for _, d in self.goals)
        return {**super().info(), "goals_by_depth": {str(d): depths[d] for d in sorted(depths)}}
