"""BabyAI as a text environment: minigrid levels, text observations, high-level actions.

Observation: `Your goal: <mission>`, sentences about walls, visible objects and the carried
object, then `Available actions: [...]`. Actions: "turn left", "turn right", "move forward",
"go to <color> <type> <k>", "pick up <color> <type> <k>", "go through <color> door <k>" (open
doors), "toggle and go through <color> door <k>" (closed or locked doors), "toggle" and "drop"
when they apply, and "check available actions". High-level actions run as BFS-planned primitive
moves on the true grid. Reward is minigrid's success reward; score is the running sum.

Option `observation=compact` (`env serve babyai --env-option observation=compact`) states the
same facts in fewer tokens, for small models on small machines: `Goal:` (the mission without
articles: "go to the red ball" reads "go to red ball", the words of the action that does it),
`Walls:`, `Seen:` (action labels with offsets), `Carrying:` and `Actions:` (the available actions,
spelled in full: a small model learns to copy an action from a list much sooner than to compose
one from a verb pattern and a label). The action set and its spelling do not change. An
unavailable action gets `Invalid action: '<it>' is not available.` and then the observation again.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

import gymnasium as gym
import minigrid  # noqa: F401 - importing registers the BabyAI levels
from minigrid.core.actions import Actions

from agentgym_envs.babyai.levels import CATEGORIES, LEVELS, level_for
from agentgym_envs.babyai.planner import plan_to_face
from agentgym_envs.babyai.view import Seen, View, describe, describe_compact, scan
from agentgym_envs.server.base import REACT_RULES, Environment, EnvOption, Episode, StepResult
from agentgym_envs.server.tools import Param, Tool

CHECK = "check available actions"
_PRIMITIVES = {
    "turn left": Actions.left,
    "turn right": Actions.right,
    "move forward": Actions.forward,
}


_OBJECT = Param(
    "object", "string", "The object's label as the observation lists it, e.g. 'red ball 1'."
)
_DOOR = Param("door", "string", "The door's label as the observation lists it, e.g. 'red door 1'.")
TOOLS = (
    Tool("turn_left", "Turn left, staying in the same cell.", "turn left"),
    Tool("turn_right", "Turn right, staying in the same cell.", "turn right"),
    Tool("move_forward", "Move one cell forward.", "move forward"),
    Tool("go_to", "Walk to a visible object, ending in front of it.", "go to {object}", (_OBJECT,)),
    Tool(
        "pick_up",
        "Walk to a visible key, ball or box and pick it up (you can carry one object).",
        "pick up {object}",
        (_OBJECT,),
    ),
    Tool("go_through", "Walk to an open door and through it.", "go through {door}", (_DOOR,)),
    Tool(
        "toggle_and_go_through",
        "Walk to a closed door, open it and go through (a locked door needs its key carried).",
        "toggle and go through {door}",
        (_DOOR,),
    ),
    Tool("toggle", "Open or close the door, or open the box, in front of you.", "toggle"),
    Tool("drop", "Drop what you carry into the empty cell in front of you.", "drop"),
    Tool("check_available_actions", "List the actions available now.", CHECK),
)

_ARTICLES = re.compile(r"\b(?:the|a|an) ")


def compact_mission(mission: str) -> str:
    """The mission without articles: BabyAI's verifiers accept any object that fits the words
    ("the" and "a" mean the same there), and the remaining words spell the action's label."""
    return _ARTICLES.sub("", mission)


def fits_mission(action: str, mission: str) -> bool:
    """Whether `action` (a listed "<verb> <color> <type> <k>") does what the compact `mission`
    asks: the same verb and every word of the mission's object in the label ("go to ball" fits
    "go to red ball 1"). Missions of one object only; sequences and "put next" fit nothing."""
    for verb in ("go to", "pick up"):
        if mission.startswith(verb + " ") and action.startswith(verb + " "):
            wanted = mission.removeprefix(verb + " ").split()
            label = action.removeprefix(verb + " ").split()
            return len(wanted) <= 2 and set(wanted) <= set(label[:-1])
    return False


def normalize(action: str) -> str:
    """Case, surrounding whitespace/quotes and a trailing period do not matter."""
    return " ".join(action.strip().strip("\"'").rstrip(".").lower().split())


class BabyAIEpisode(Episode):
    """One BabyAI episode; the minigrid env is kept across resets of the same level."""

    def __init__(self, compact: bool = False) -> None:
        self._compact = compact
        self._env: Any = None
        self._level: str | None = None
        self._view = View((), {})
        self._actions: dict[str, Callable[[], str]] = {}
        self._score = 0.0
        self._done = False

    @property
    def minigrid_env(self) -> Any:
        """The unwrapped minigrid env (for tests and expert bots)."""
        return self._env

    def label_at(self, pos: tuple[int, int]) -> str | None:
        """The action label of the visible object at absolute `pos`, if any."""
        return next((o.label for o in self._view.objects if o.pos == tuple(pos)), None)

    # -- Episode ---------------------------------------------------------------------------------
    def reset(self, data_idx: int) -> StepResult:
        level, seed = level_for(data_idx)
        if level != self._level:
            self.close()
            self._env = gym.make(level, disable_env_checker=True).unwrapped
            self._level = level
        with contextlib.redirect_stdout(io.StringIO()):  # "Sampling rejected: ..." spam
            self._env.reset(seed=seed)
        self._score, self._done = 0.0, False
        self._refresh()
        return StepResult(self.observation(), 0.0, 0.0, False)

    def step(self, action: str) -> StepResult:
        key = normalize(action)
        if key == CHECK:
            return StepResult(self._available_text(), 0.0, self._score, False)
        run = self._actions.get(key)
        if run is None:
            if self._compact:
                # Restated so that the reply ends like every other observation: a small policy
                # that meets an observation-less error message rarely writes a well-formed turn
                # after it (17 of 3,042 training episodes recovered)
                text = f"Invalid action: {action.strip()!r} is not available.\n{self.observation()}"
            else:
                text = (
                    f"Invalid action: {action.strip()!r} is not available. "
                    f"Choose one of the available actions.\n{self._available_text()}"
                )
            return StepResult(text, 0.0, self._score, False, invalid=True)
        before = self._score
        feedback = run()
        self._refresh()
        lines = [feedback] if feedback else []
        if self._done:
            lines.append("You completed the goal." if self._score > 0 else "You ran out of steps.")
        lines.append(self.observation())
        return StepResult("\n".join(lines), self._score - before, self._score, self._done)

    def observation(self) -> str:
        if self._compact:
            body = "\n".join(describe_compact(self._view, self._env.carrying))
            listed = ", ".join(a for a in self.available_actions() if a != CHECK)
            return f"Goal: {compact_mission(self._env.mission)}\n{body}\nActions: {listed}"
        body = "\n".join(describe(self._view, self._env.carrying))
        return f"Your goal: {self._env.mission}\n{body}\n{self._available_text()}"

    def available_actions(self) -> list[str]:
        return [*self._actions, CHECK]

    def random_action(self, rng: random.Random) -> str | None:
        # CHECK repeats what every observation already lists: a random turn spent on it teaches
        # the format nothing.
        return rng.choice(list(self._actions)) if self._actions else None

    def rule_action(self, rng: random.Random) -> str | None:
        """The listed action whose verb and object fit the mission ("go to red ball" does
        "go to red ball 2"; of several fits, one at random), else "turn left"."""
        if not self._actions:
            return None
        fits = [a for a in self._actions if fits_mission(a, compact_mission(self._env.mission))]
        return rng.choice(fits) if fits else "turn left"

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
            self._level = None

    # -- actions ---------------------------------------------------------------------------------
    def _available_text(self) -> str:
        return "Available actions: " + json.dumps(self.available_actions())

    def _refresh(self) -> None:
        self._view = scan(self._env)
        acts: dict[str, Callable[[], str]] = {}
        if self._done:
            self._actions = acts
            return
        for name, prim in _PRIMITIVES.items():
            acts[name] = partial(self._primitive, name, prim)
        carrying = self._env.carrying is not None
        for obj in self._view.objects:
            acts[f"go to {obj.label}"] = partial(self._go_to, obj)
            if obj.kind in ("key", "ball", "box") and not carrying:
                acts[f"pick up {obj.label}"] = partial(self._pick_up, obj)
            if obj.kind == "door":
                verb = "go through" if obj.state == "open" else "toggle and go through"
                acts[f"{verb} {obj.label}"] = partial(self._through, obj)
        front = self._env.grid.get(*self._env.front_pos)
        if front is not None and front.type in ("door", "box"):
            acts["toggle"] = lambda: self._primitive("toggle", Actions.toggle)
        if carrying and front is None:
            acts["drop"] = lambda: self._primitive("drop", Actions.drop)
        self._actions = acts

    def _run(self, actions: list[int]) -> bool:
        """Step primitive actions until they run out or the episode ends; False if it ended."""
        for a in actions:
            _, reward, terminated, truncated, _ = self._env.step(a)
            self._score += float(reward)
            if terminated or truncated:
                self._done = True
                return False
        return True

    def _primitive(self, name: str, action: int) -> str:
        before = (tuple(self._env.agent_pos), self._env.carrying)
        self._run([action])
        if action == Actions.forward and tuple(self._env.agent_pos) == before[0] and not self._done:
            return "You cannot move forward: the way is blocked."
        if action == Actions.drop and self._env.carrying is before[1] and not self._done:
            return "You cannot drop here."
        return ""

    def _go_to(self, obj: Seen) -> str:
        plan = plan_to_face(self._env, obj.pos)
        if plan is None:
            return f"You cannot reach the {obj.label} from here."
        self._run(plan)
        return ""

    def _pick_up(self, obj: Seen) -> str:
        plan = plan_to_face(self._env, obj.pos)
        if plan is None:
            return f"You cannot reach the {obj.label} from here."
        if self._run(plan) and self._run([Actions.pickup]) and self._env.carrying is None:
            return f"You cannot pick up the {obj.label}."
        return ""

    def _through(self, obj: Seen) -> str:
        plan = plan_to_face(self._env, obj.pos)
        if plan is None:
            return f"You cannot reach the {obj.label} from here."
        if not self._run(plan):
            return ""
        door = self._env.grid.get(*obj.pos)
        if door is not None and door.type == "door" and not door.is_open:
            if not self._run([Actions.toggle]):
                return ""
            if not door.is_open:
                return f"The {obj.label} is locked: you need a {obj.color} key to open it."
        self._run([Actions.forward, Actions.forward])
        return ""


class BabyAIEnvironment(Environment):
    """40 BabyAI levels; task ids are unbounded (`data_idx // 40` is the seed)."""

    name: ClassVar[str] = "babyai"
    rule: ClassVar[str | None] = "the goal's action if listed, else turn left"
    description: ClassVar[str] = (
        "BabyAI grid worlds (minigrid): 40 levels, text view, BFS-planned high-level actions"
    )
    system_prompt: ClassVar[str | None] = (
        "You are an agent in a BabyAI grid world. Each observation states your goal, what you "
        "see relative to you, what you carry and the available actions. Choose one of the "
        "available actions, written exactly as listed (e.g. 'go to red ball 1'). " + REACT_RULES
    )
    options: ClassVar[tuple[EnvOption, ...]] = (
        EnvOption(
            "observation",
            default="verbose",
            choices=("verbose", "compact"),
            help="compact: one short line per object (small policies), verbose: AgentGym's text",
        ),
    )
    tools: ClassVar[tuple[Tool, ...]] = TOOLS
    splits: ClassVar[dict[str, str | range]] = {
        "train": "data/train.json",
        "test": "data/test.json",
        "goto_train": "data/goto_train.json",
        "goto_test": "data/goto_test.json",
        "study_train": "data/study_train.json",
        "study_test": "data/study_test.json",
        "ladder_test": "data/ladder_test.json",
        "distractor_train": "data/distractor_train.json",
        "distractor_test": "data/distractor_test.json",
    }

    def __init__(self, observation: str = "verbose") -> None:
        if observation not in ("verbose", "compact"):
            raise ValueError(f"observation must be 'verbose' or 'compact', not {observation!r}")
        self.compact = observation == "compact"

    def new_episode(self) -> BabyAIEpisode:
        return BabyAIEpisode(compact=self.compact)

    def num_tasks(self) -> int | None:
        return None

    def info(self) -> dict[str, Any]:
        return {
            **super().info(),
            "levels": list(LEVELS),
            "categories": CATEGORIES,
            "observation": "compact" if self.compact else "verbose",
        }
