"""TextCraft in-process: every goal is solvable from its observation, the id -> goal mapping is
pinned and deterministic, actions answer with the documented messages."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from agentgym_envs.textcraft.env import DATA, TextCraftEnvironment, TextCraftEpisode
from agentgym_envs.textcraft.recipes import CraftingGraph
from textcraft_listing import item_names

_COMMAND = re.compile(r"^craft (\d+) (.+?) using (.+)$")


class _Solver:
    """Plays a task using only the crafting commands its observation lists (and `get`)."""

    def __init__(self, episode: TextCraftEpisode, observation: str) -> None:
        self.episode = episode
        self.recipes: dict[str, list[tuple[int, list[tuple[int, str]]]]] = {}
        for line in observation.split("\n"):
            if m := _COMMAND.match(line):
                parts = [p.split(" ", 1) for p in m[3].split(", ")]
                self.recipes.setdefault(m[2], []).append(
                    (int(m[1]), [(int(n), i) for n, i in parts])
                )
        self.goal = observation.rsplit("Goal: craft ", 1)[1].removesuffix(".")
        self.inv: Counter[str] = Counter()
        self.steps = 0
        self.done = False

    def act(self, action: str) -> str:
        self.steps += 1
        result = self.episode.step(action)
        self.done = result.done
        return result.observation

    def ensure(self, item: str, count: int, path: frozenset[str] = frozenset()) -> bool:
        if self.inv[item] >= count:
            return True
        if item in path:
            return False
        for out, ingredients in self.recipes.get(item, []):
            k = -(-(count - self.inv[item]) // out)
            need = [(n * k, i) for n, i in ingredients]
            for _ in range(4):  # crafting one ingredient may consume another: re-check
                if all(self.inv[i] >= n for n, i in need):
                    break
                if not all(self.ensure(i, n, path | {item}) for n, i in need):
                    break
            if all(self.inv[i] >= n for n, i in need):
                using = ", ".join(f"{n} {i}" for n, i in need)
                assert self.act(f"craft {out * k} {item} using {using}").startswith("Crafted ")
                self.inv.subtract({i: n for n, i in need})
                self.inv[item] += out * k
                return True
        if self.act(f"get {count - self.inv[item]} {item}").startswith("Got "):
            self.inv[item] = count
            return True
        return False


def test_every_goal_is_solvable_from_its_observation() -> None:
    env = TextCraftEnvironment()
    episode = env.new_episode()
    assert env.num_tasks() == len(env.goals) == 551
    for idx in range(len(env.goals)):
        solver = _Solver(episode, episode.reset(idx).observation)
        assert solver.goal == env.goals[idx][0].replace("_", " ")
        assert solver.ensure(solver.goal, 1), (idx, solver.goal)
        assert solver.done and episode.step("inventory").observation.startswith("Inventory: ")


def test_lexicon_names_every_item_an_observation_lists() -> None:
    """`init-model` makes each lexicon name one token: every name a task lists or aims at is
    one of them."""
    env = TextCraftEnvironment()
    lexicon = set(env.lexicon())
    episode = env.new_episode()
    for idx in range(0, len(env.goals), 7):
        listed = episode.reset(idx).observation
        solver = _Solver(episode, listed)
        names = {solver.goal} | set(solver.recipes)
        names |= {i for rs in solver.recipes.values() for _, parts in rs for _, i in parts}
        assert names <= lexicon, names - lexicon


def test_goal_mapping_is_pinned_and_sorted() -> None:
    goals = json.loads((DATA / "goals.json").read_text())
    assert [(g["item"], g["depth"]) for g in goals] == CraftingGraph().goals
    assert [(g["depth"], g["item"]) for g in goals] == sorted(
        (g["depth"], g["item"]) for g in goals
    )
    assert {g["depth"] for g in goals} == {1, 2, 3, 4}


def test_splits_match_the_reference_sizes() -> None:
    rows = {n: json.loads((DATA / f"{n}.json").read_text()) for n in ("train", "test", "extra")}
    assert (len(rows["train"]), len(rows["test"])) == (374, 100)
    ids = [r["item_id"] for split in rows.values() for r in split]
    assert len(ids) == len(set(ids)) == 551
    assert {r["category"] for r in rows["test"]} == {"depth_1", "depth_2", "depth_3", "depth_4"}


def test_shallow_splits_hold_depth_1_2_with_the_test_split_held_out() -> None:
    rows = {
        n: {r["item_id"]: r["category"] for r in json.loads((DATA / f"{n}.json").read_text())}
        for n in ("train", "test", "extra", "shallow_train", "shallow_test")
    }
    shallow = {"depth_1", "depth_2"}
    assert rows["shallow_test"] == {i: c for i, c in rows["test"].items() if c in shallow}
    others = {**rows["train"], **rows["extra"]}
    assert rows["shallow_train"] == {i: c for i, c in others.items() if c in shallow}
    assert len(rows["shallow_test"]) + len(rows["shallow_train"]) == 143 + 281


def test_fewer_distractors_list_a_prefix_of_the_same_draw_and_stay_solvable() -> None:
    full, few = TextCraftEnvironment(), TextCraftEnvironment(distractors=3)
    a, b = full.new_episode(), few.new_episode()
    for idx in (0, 150, 300, 500):
        listed = [
            line for line in a.reset(idx).observation.splitlines() if line.startswith("craft")
        ]
        shown = b.reset(idx).observation
        kept = [line for line in shown.splitlines() if line.startswith("craft")]
        assert set(kept) < set(listed)
        assert len(kept) == len(full.graph.plan(full.goals[idx][0])) + 3
        solver = _Solver(b, shown)
        assert solver.ensure(solver.goal, 1) and solver.done
    with pytest.raises(ValueError, match="distractors must be 0-10"):
        TextCraftEnvironment(distractors=11)


def test_state_observation_restates_commands_inventory_and_goal_after_each_step() -> None:
    plain, state = TextCraftEnvironment(distractors=3), TextCraftEnvironment("state", 3)
    a, b = plain.new_episode(), state.new_episode()
    first = a.reset(0).observation
    assert b.reset(0).observation == first
    listing = first.split("\n\n")[0]
    goal = first.splitlines()[-1]
    assert goal == "Goal: craft acacia planks."
    got = b.step("get 1 acacia log").observation
    message = a.step("get 1 acacia log").observation
    assert message == "Got 1 acacia log"
    assert got == f"{message}\n{listing}\nInventory: 1 acacia log\n{goal}"
    # messages name items as the commands do, so a missing ingredient copies into a get
    assert b.step("craft 8 acacia planks using 2 acacia log").observation.startswith(
        "Could not find enough items to craft acacia planks (missing 1 acacia log)\n"
    )
    assert a.step("craft 8 acacia planks using 2 acacia log").observation == (
        "Could not find enough items to craft minecraft:acacia_planks "
        "(missing 1 minecraft:acacia_log)"
    )
    assert b.step("inventory").observation.startswith("Inventory: 1 acacia log\n")
    done = b.step("craft 4 acacia planks using 1 acacia log")
    assert done.done and done.observation == "Crafted 4 acacia planks"
    with pytest.raises(ValueError, match="observation must be 'reference' or 'state'"):
        TextCraftEnvironment("verbose")


def test_observation_is_deterministic_and_messages() -> None:
    env = TextCraftEnvironment()
    a, b = env.new_episode(), env.new_episode()
    assert a.reset(42).observation == b.reset(42).observation
    obs = a.reset(0).observation
    assert obs.startswith("Crafting commands:\n") and "\n\nGoal: craft " in obs
    assert len(obs.split("\n\n")[0].split("\n")) - 1 <= len(env.graph.plan(env.goals[0][0])) + 10
    assert a.step("get 2 oak log").observation == "Got 2 oak log"
    missing = a.step("get 1 stick")  # a valid command that fails is not an invalid action
    assert missing.observation == "Could not find stick" and not missing.invalid
    assert (
        a.step("craft 4 oak planks using 1 minecraft:oak_log").observation
        == "Crafted 4 minecraft:oak_planks"
    )
    assert a.step("craft 3 oak planks using 1 oak log").observation.startswith(
        "Could not find a valid recipe"
    )
    assert a.step("craft 8 oak planks using 2 oak log").observation.startswith(
        "Could not find enough items"
    )
    assert (
        a.step("inventory").observation
        == "Inventory: [minecraft:oak_log] (1) [minecraft:oak_planks] (4)"
    )
    dance = a.step("dance")
    assert dance.observation.startswith("Could not execute") and dance.invalid


def _depth_2_with_one_intermediate(graph: CraftingGraph, goals: list[tuple[str, int]]) -> int:
    """A depth-2 goal whose plan crafts one intermediate item from gettable items only."""
    return next(
        i
        for i, (goal, depth) in enumerate(goals)
        if depth == 2
        and len(plan := graph.plan(goal)) == 2
        and all(item in graph.gettable for item, _ in plan[1].ingredients)
    )


def test_progress_credit_ranks_failures_by_intermediates_crafted_and_keeps_success_above_0() -> (
    None
):
    env = TextCraftEnvironment("state", 1, progress_credit=0.2)
    graph, goals = env.graph, list(env.goals)
    idx = _depth_2_with_one_intermediate(graph, goals)
    inter = graph.plan(goals[idx][0])[1]
    ep = env.new_episode()
    assert ep.reset(idx).score == pytest.approx(-0.2)  # nothing crafted yet
    for item, n in inter.ingredients:
        assert ep.step(f"get {n} {item.replace('_', ' ')}").score == pytest.approx(-0.2)
    crafted = ep.step(inter.command())
    assert crafted.observation.startswith("Crafted ")
    assert (crafted.score, crafted.reward, crafted.done) == (pytest.approx(0.0), 0.2, False)
    # the reference's scoring without the option: 0 until the goal, 1 then
    plain = TextCraftEnvironment("state", 1).new_episode()
    assert plain.reset(idx).score == 0.0
    # a depth-1 goal has no intermediate: every failure scores -c, a success 1
    one = env.new_episode()
    d1 = next(i for i, (_, depth) in enumerate(goals) if depth == 1)
    first = one.reset(d1)
    solver = _Solver(one, first.observation)
    assert solver.ensure(solver.goal, 1) and solver.done
    assert one.step("inventory").score == 1.0
    with pytest.raises(ValueError, match="progress_credit must be in"):
        TextCraftEnvironment(progress_credit=1.0)


def test_redraw_lists_each_reset_its_own_distractors_and_order_for_the_same_goal() -> None:
    fixed, redrawn = TextCraftEnvironment("state", 3), TextCraftEnvironment("state", 3, redraw=True)
    idx = 40
    task = fixed.new_episode().reset(idx).observation
    assert fixed.new_episode().reset(idx).observation == task  # the task's own draw, always
    seen = {redrawn.new_episode().reset(idx).observation for _ in range(6)}
    ep = redrawn.new_episode()
    seen |= {ep.reset(idx).observation, ep.reset(idx).observation}  # per reset, not per episode
    assert len(seen) == 8 and task not in seen
    goal = task.rsplit("\n", 1)[1]
    needed = {r.command() for r in fixed.graph.plan(fixed.goals[idx][0])}
    for text in seen:
        listed = {line for line in text.split("\n") if line.startswith("craft ")}
        assert text.endswith(goal) and needed <= listed and len(listed) == len(needed) + 3
    # still solvable from what it lists
    first = ep.reset(idx)
    solver = _Solver(ep, first.observation)
    assert solver.ensure(solver.goal, 1) and solver.done


def _copied_solution(observation: str, graph: CraftingGraph) -> list[str]:
    """The actions a copy of a scaled listing's lines solves its goal with: for each line of the
    goal's plan (deepest first; told from distractors by result and ingredient names), a `get` of
    each gettable ingredient at its listed count, then the line itself. No count is computed."""
    listed = [m for line in observation.split("\n") if (m := _COMMAND.match(line))]
    goal = observation.rsplit("Goal: craft ", 1)[1].removesuffix(".").replace(" ", "_")
    actions = []
    for recipe in sorted(graph.plan(goal), key=lambda r: graph.depth[r.result]):
        names = {i.replace("_", " ") for i, _ in recipe.ingredients}
        [line] = [
            m
            for m in listed
            if m[2] == recipe.result.replace("_", " ")
            and {p.split(" ", 1)[1] for p in m[3].split(", ")} == names
        ]
        parts = [
            p for p in line[3].split(", ") if p.split(" ", 1)[1].replace(" ", "_") in graph.gettable
        ]
        actions += [f"get {p}" for p in parts] + [line[0]]
    return actions


def _short(line: str) -> str:
    """A listed line named by its item: 'craft 4 stick using 8 bamboo' -> 'craft stick'."""
    verb, _, item = line.split(" using ")[0].split(" ", 2)
    return f"{verb} {item}"


def test_scaled_lists_needed_recipes_at_the_goals_counts_and_a_copy_of_them_solves_every_goal() -> (
    None
):
    plain, scaled = TextCraftEnvironment("state", 1), TextCraftEnvironment("state", 1, scaled=True)
    graph, goals = scaled.graph, scaled.goals
    multiplied = 0
    for idx in range(len(goals)):
        ep = scaled.new_episode()
        first = ep.reset(idx).observation
        actions = _copied_solution(first, graph)
        results = [ep.step(a) for a in actions]
        assert results[-1].done and results[-1].score == 1.0, (goals[idx], actions, results[-1])
        assert not any(r.done for r in results[:-1])  # each line once, nothing to spare
        # the same draw of distractors and order: only the needed lines' counts differ
        reference = plain.new_episode().reset(idx).observation
        assert len(first.split("\n")) == len(reference.split("\n"))
        multiplied += first != reference
    assert multiplied > 100  # goals whose intermediates the goal needs more than once of
    # the acacia fence gate takes 4 sticks: 'craft 1 stick using 2 bamboo' made 4 times
    idx = next(i for i, (item, _) in enumerate(goals) if item == "acacia_fence_gate")
    assert "craft 4 stick using 8 bamboo" in scaled.new_episode().reset(idx).observation
    assert "craft 1 stick using 2 bamboo" in plain.new_episode().reset(idx).observation


def test_menu_numbers_every_action_and_choosing_the_copied_lines_numbers_solves_every_goal() -> (
    None
):
    """`menu`: the listing is the task's crafts and the gets of their gettable ingredients,
    numbered; answering a line's number does what the line says, so the numbers of the lines a
    copy would write solve every goal. A number off the menu is refused and changes nothing."""
    env = TextCraftEnvironment("state", 1, scaled=True, menu="numbers")
    for idx in range(len(env.goals)):
        ep = env.new_episode()
        first = ep.reset(idx).observation
        menu = dict(re.findall(r"^(\d+)\. (.+)$", first, re.M))
        assert list(menu) == [str(i) for i in range(1, len(menu) + 1)]
        choices = {action: number for number, action in menu.items()}
        # the same actions a copy of the scaled listing writes, each a line of the menu
        crafts = "\n".join(a for a in menu.values() if a.startswith("craft "))
        goal = first.rsplit("\n", 1)[1]
        actions = _copied_solution(f"{crafts}\n{goal}", env.graph)
        results = [ep.step(choices[a]) for a in actions]
        assert results[-1].done and results[-1].score == 1.0, (env.goals[idx], actions)
        gets = {a for a in menu.values() if a.startswith("get ")}
        assert gets and all(
            g.split(" ", 2)[2].replace(" ", "_") in env.graph.gettable for g in gets
        )
    ep = env.new_episode()
    first = ep.reset(0).observation
    n = len(re.findall(r"^\d+\. ", first, re.M))
    refused = ep.step(str(n + 1))
    assert refused.invalid and refused.reward == 0.0 and not refused.done
    assert refused.observation.startswith(f"No action {n + 1}: choose 1-{n}.")
    assert "Inventory: nothing" in refused.observation  # nothing was done
    # the written action still works beside the numbers
    written = re.search(r"^\d+\. (get .+)$", first, re.M)
    assert written and ep.step(written[1]).observation.startswith("Got ")


def test_menu_random_actions_are_numbers_on_the_menu_and_menu_needs_scaled() -> None:
    import random

    env = TextCraftEnvironment("state", 1, redraw=True, scaled=True, menu="numbers")
    ep = env.new_episode()
    n = len(re.findall(r"^\d+\. ", ep.reset(5).observation, re.M))
    rng = random.Random(0)
    drawn = {ep.random_action(rng) for _ in range(200)}
    assert drawn == {str(i) for i in range(1, n + 1)}
    with pytest.raises(ValueError, match="menu=numbers needs scaled=true"):
        TextCraftEnvironment("state", 1, menu="numbers")


def test_menu_names_does_the_listed_line_for_the_item_named_and_solves_every_goal() -> None:
    """`menu=names`: the menu unnumbered, and `get X` / `craft X` do the listed line that gets or
    crafts X, at its listed count with its listed ingredients: the short names of the lines a
    copy would write solve every goal. An item no line gets or crafts is refused."""
    import random

    env = TextCraftEnvironment("state", 1, redraw=True, scaled=True, menu="names")
    rng = random.Random(0)
    for idx in range(len(env.goals)):
        ep = env.new_episode()
        first = ep.reset(idx).observation
        lines = first.split("\n\n")[0].split("\n")[1:]
        assert lines and not any(re.match(r"\d", line) for line in lines)
        actions = _copied_solution(first, env.graph)
        short = [_short(a) for a in actions]
        results = [ep.step(a) for a in short]
        assert results[-1].done and results[-1].score == 1.0, (env.goals[idx], short)
        assert not any(r.invalid for r in results)
        # a random action names a listed line's item in the short form
        lines = ep.reset(idx).observation.split("\n\n")[0].split("\n")[1:]  # a new draw
        action = ep.random_action(rng)
        assert action and re.match(r"^(get|craft) [a-z]", action)
        verb, item = action.split(" ", 1)
        assert any(line.startswith(verb) and f" {item}" in line for line in lines)
    # with a menu, a craft short of an ingredient is unavailable: nothing happens, an invalid
    # turn (without one, a refused command is a valid action that failed)
    for menu, unavailable in (("names", True), ("off", False)):
        ep = TextCraftEnvironment("state", 1, scaled=True, menu=menu).new_episode()
        first = ep.reset(0).observation
        craft = next(line for line in first.split("\n") if line.startswith("craft "))
        short = ep.step(craft)
        assert short.observation.startswith("Could not find enough items")
        assert short.invalid == unavailable
    ep = env.new_episode()
    ep.reset(0)
    refused = ep.step("craft bedrock")
    assert refused.invalid and refused.observation.startswith(
        "No listed action does 'craft bedrock'."
    )
    with pytest.raises(ValueError, match="menu must be one of off, numbers, names"):
        TextCraftEnvironment("state", 1, scaled=True, menu="letters")


def _sections(observation: str) -> tuple[list[str], list[str]]:
    """An admissible menu's recipes (as crafts) and the actions it lists now."""
    recipes = observation.split("Recipes:\n", 1)[1].split("\nActions:\n", 1)[0].split("\n")
    actions = observation.split("\nActions:\n", 1)[1].split("\n\n")[0].split("\nInventory")[0]
    return [f"craft {r}" for r in recipes], actions.split("\n")


def test_admissible_menu_lists_what_the_inventory_can_do_below_every_recipe() -> None:
    """`admissible`: each turn the menu lists every get and only the crafts whose ingredients are
    held, below all the task's recipes (which say which gets lead to the goal). The short names
    of a copy's lines solve every goal, each line listed when it is played; a craft named before
    its ingredients are held is off the menu, and random actions are listed lines."""
    import random

    env = TextCraftEnvironment("state", 1, redraw=True, scaled=True, menu="names", admissible=True)
    rng = random.Random(0)
    for idx in range(len(env.goals)):
        ep = env.new_episode()
        observation = ep.reset(idx).observation
        recipes, actions = _sections(observation)
        assert all(a.startswith("get ") for a in actions)  # nothing held: no craft yet
        goal = observation.rsplit("\n", 1)[1]
        for line in _copied_solution("\n".join(recipes) + f"\n{goal}", env.graph):
            recipes_now, actions = _sections(observation)
            assert recipes_now == recipes and line in actions, (env.goals[idx], line, actions)
            result = ep.step(_short(line))
            assert not result.invalid
            observation = result.observation
        assert result.done and result.score == 1.0
        ep.reset(idx)
        for _ in range(5):  # random actions name a line listed at that turn
            action = ep.random_action(rng)
            assert action is not None
            listed = _sections(ep.observation())[1]
            assert any(
                a.startswith(action.split(" ", 1)[0]) and action.split(" ", 1)[1] in a
                for a in listed
            )
            if ep.step(action).done:
                break
    ep = env.new_episode()
    observation = ep.reset(0).observation
    refused = ep.step(_short(_sections(observation)[0][0]))
    assert refused.invalid and refused.observation.startswith("No listed action does 'craft ")
    with pytest.raises(ValueError, match="admissible=true needs a menu"):
        TextCraftEnvironment("state", 1, scaled=True, admissible=True)


def test_rename_swaps_item_names_consistently_outside_the_test_split_and_stays_solvable() -> None:
    """`rename`: a training goal is played with every item name swapped by a permutation, each
    reset its own. The renamed observation is the plain one with names swapped one for one; the
    plain solution written in the shown names solves it; an action is read back through the same
    swap; held-out goals (the test split) show their own names."""
    options = {"redraw": True, "scaled": True, "menu": "names", "admissible": True}
    plain = TextCraftEnvironment("state", 1, **options)
    renamed = TextCraftEnvironment("state", 1, **options, rename=True)
    held_out = {
        int(r["item_id"].split("_")[1]) for r in json.loads((DATA / "test.json").read_text())
    }
    goals_renamed = goals_played = 0
    for idx in range(len(plain.goals)):
        ep, ref = renamed.new_episode(), plain.new_episode()
        shown, real = ep.reset(idx).observation, ref.reset(idx).observation  # the same draw
        if idx in held_out:
            assert shown == real
            continue
        swap = dict(zip(item_names(real), item_names(shown), strict=True))
        assert len(set(swap.values())) == len(swap)  # one for one
        goal = item_names(real)[-1]
        goals_played += 1
        goals_renamed += swap[goal] != goal
        recipes = _sections(real)[0]
        for line in _copied_solution(
            "\n".join(recipes) + "\n" + real.rsplit("\n", 1)[1], plain.graph
        ):
            verb, item = _short(line).split(" ", 1)
            result = ep.step(f"{verb} {swap[item]}")
            assert not result.invalid, (plain.goals[idx], line, result.observation)
        assert result.done and result.score == 1.0
    # nearly every goal shows another item's name, and a goal is renamed anew at its next reset
    assert goals_renamed > 0.95 * goals_played
    ep = renamed.new_episode()
    idx = next(i for i in range(len(plain.goals)) if i not in held_out)
    first, second = ep.reset(idx).observation, ep.reset(idx).observation
    assert first.rsplit("Goal: ", 1)[1] != second.rsplit("Goal: ", 1)[1]
    # an unlisted name is refused under its shown name, as the policy wrote it
    refused = ep.step("get glowstone dust")
    assert refused.invalid and "'get glowstone dust'" in refused.observation
    with pytest.raises(ValueError, match="rename=true needs observation=state"):
        TextCraftEnvironment("reference", 1, rename=True)
