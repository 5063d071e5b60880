"""The environment interface every served env implements, and the errors the server reports.

An `Environment` is a factory of `Episode`s plus static metadata. The server (`table.py`) owns
the id -> episode map, so an env implementation never sees ids, sockets or timeouts: it turns
`reset(data_idx)` and `step(action)` into a `StepResult`. This is the public contract: the
built-in envs and a user's own (found by entry point or `module:Class`, `catalog.py`) implement
it alike. Besides the two abstract methods each of `Environment` and `Episode`, an env may
declare, each optional: a description, its action format and system prompt, how its score
becomes a reward, typed options, splits of task ids with categories, the system programs it
needs, its actions as tools (`server/tools.py`), a random valid action
(`Episode.random_action`) and a scripted rule (`Episode.rule_action`), the two yardsticks a
policy is shown beside. docs/envs.md is the author's guide.
"""

from __future__ import annotations

import enum
import json
import random
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from agentgym_envs.server.tools import Tool, generic_tool

ACTION_FORMATS = ("react", "tags", "webarena")
"""How an env's actions are written in the agent's text: ReAct `Action:` lines, Search-R1 tags,
WebArena commands in a fence (the rollout side's `ActionFormat`)."""


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one reset or step produced.

    `reward` is this step's reward, `score` the episode's running score (what AgentGym clients
    treat as the final result), `done` whether the episode ended, `invalid` whether the env
    refused the action (not available or not understood: nothing happened).
    """

    observation: str
    reward: float = 0.0
    score: float = 0.0
    done: bool = False
    invalid: bool = False


class ErrorCode(str, enum.Enum):
    """Machine-readable error kinds, sent as `code` over ZMQ (HTTP sends only `error`)."""

    BAD_REQUEST = "bad_request"  # malformed body, missing field, wrong type, unknown op
    UNKNOWN_EPISODE = "unknown_episode"  # id never created, closed or reaped
    NOT_RESET = "not_reset"  # step/observation before the first reset
    EPISODE_DONE = "episode_done"  # step after done
    BAD_DATA_IDX = "bad_data_idx"  # task id outside the env's range
    INTERNAL = "internal"  # the env raised: a bug, reported instead of crashing


class EnvError(Exception):
    """A request the server refuses; it never affects other episodes."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


REACT_RULES = (
    "Each turn, first think on a line starting with 'Thought:', then give exactly one action on "
    "a line starting with 'Action:'. Only the last 'Action:' line is executed."
)
"""How a ReAct turn is written: the end of every `react` env's system prompt."""


class EnvUnavailable(RuntimeError):
    """The env cannot run on this machine (a system package is missing); the message says how to
    get it. The server reports it and exits 1 instead of starting."""


@dataclass(frozen=True, slots=True)
class EnvOption:
    """One option of an env's constructor (`--env-option NAME=VALUE`, `env_options:` in a config):
    given as a string, converted to `type` and checked against `choices` and `minimum` before the
    env is built, so a bad value is refused naming the option. Shown by `env list -v NAME`."""

    name: str
    type: type = str  # str, int, float or bool
    default: Any = None
    help: str = ""
    choices: tuple[str, ...] = ()
    minimum: float | None = None

    def parse(self, env: str, value: Any) -> Any:
        """`value` (a string from a command line, or already typed) as this option's type."""
        shown = f"{env} option {self.name}={value!r}"
        if self.type is bool:
            return _flag(shown, value)
        try:
            out = self.type(value)
        except (TypeError, ValueError):
            raise ValueError(f"{shown}: expected {self.type.__name__}") from None
        if self.choices and out not in self.choices:
            raise ValueError(f"{shown}: expected one of {', '.join(self.choices)}")
        if self.minimum is not None and out < self.minimum:
            raise ValueError(f"{shown}: must be >= {self.minimum:g}")
        return out


def _flag(shown: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{shown}: expected true or false")


class Episode(ABC):
    """One live episode. Methods are called from the server's event loop, one at a time."""

    @abstractmethod
    def reset(self, data_idx: int) -> StepResult:
        """Start task `data_idx` (validated by `Environment.check_data_idx` first)."""

    @abstractmethod
    def step(self, action: str) -> StepResult:
        """Apply one text action. An unknown action is not an error: it yields an observation
        that says so, zero reward and `done=False`."""

    @abstractmethod
    def observation(self) -> str:
        """The current observation, without changing state."""

    @abstractmethod
    def available_actions(self) -> list[str]:
        """The actions valid right now (may be a template list for open-ended envs)."""

    def random_action(self, rng: random.Random) -> str | None:
        """A valid action drawn at random, knowing nothing of which one helps (what `init-model`'s
        format transcripts play; None: no action is valid). Default: uniform over
        `available_actions()`; open-ended envs fill their templates here instead."""
        choices = self.available_actions()
        return rng.choice(choices) if choices else None

    def rule_action(self, rng: random.Random) -> str | None:
        """The action of a cheap scripted rule that reads the observation (BabyAI: go to the
        goal when it is listed, else turn): the yardstick above chance that a policy which
        reads its task should reach. Declared with `Environment.rule`; `rng` breaks ties. None:
        no action is valid."""
        raise NotImplementedError(f"{type(self).__name__} declares no scripted rule")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources. Called once when the episode is closed or reaped."""


class Environment(ABC):
    """An env as the server sees it: an episode factory plus metadata.

    Declarations (class attributes; each optional but `name`) tell the rest of the system how to
    run the env without a table of its own anywhere else."""

    name: ClassVar[str]
    """The env's name: the prefix of its task ids (`<name>_<data_idx>`) and of its metrics."""
    description: ClassVar[str] = ""
    """One line for `env list`."""
    action_format: ClassVar[str] = "react"
    """How agents write its actions: one of `ACTION_FORMATS`."""
    system_prompt: ClassVar[str | None] = None
    """The system prompt of its episodes (None: the generic prompt of its action format)."""
    score_scale: ClassVar[float] = 1.0
    """An episode's reward is its final score / `score_scale`."""
    success_at: ClassVar[float | None] = None
    """An episode succeeded when its reward is at least this (None: when it is above 0)."""
    rule: ClassVar[str | None] = None
    """What its episodes' `rule_action` plays, in a few words for figures and summaries ("the
    goal's action if listed, else turn left"); None: it declares no scripted rule, and none is
    shown beside a policy."""
    state_ignore: ClassVar[str | None] = None
    """A regular expression of what its observations say that is not the state an action is
    taken from (Maze: "12 moves left"): removed before turns are compared for step-level credit
    (two turns of one group whose observations are then equal started from the same state).
    None: the whole text, whitespace collapsed."""
    options: ClassVar[tuple[EnvOption, ...]] = ()
    """The constructor's options, typed (none declared: read from its signature, as strings)."""
    splits: ClassVar[dict[str, str | range]] = {}
    """Split name (`train`, `test`, ...) -> its task ids: a JSON file of `{"item_id",
    "category"}` rows relative to the folder of the class's module (package data), or a `range`
    of ids (each in the category `category(data_idx)` gives). Override `tasks` instead for
    splits computed from a seed."""
    needs: ClassVar[dict[str, str]] = {}
    """Programs it needs on PATH -> how to install each (checked before a run starts)."""
    tools: ClassVar[tuple[Tool, ...]] = ()
    """Its actions as tools, for agents that speak native tool calls (`server/tools.py`; none
    declared: `generic_tool()`, one `act(action)`)."""
    # TextCraft's reference `/create` also resets to task 0 and returns the first observation.
    create_resets: ClassVar[bool] = False
    # Which AgentGym HTTP variant `http.py` speaks for this env: "agentgym" (BabyAI, TextCraft:
    # `id`/`data_idx`, object replies), "sciworld" (plus the task fields on `/reset`) or
    # "searchqa" (`env_idx`, bare-int create, bare-string reset). ZeroMQ is the same for all.
    http_dialect: ClassVar[str] = "agentgym"
    # An env whose calls may block for seconds (SciWorld: starting or loading a simulator JVM)
    # runs them on one worker thread of its own, in arrival order, so that the server's event
    # loop keeps answering health probes meanwhile (a blocked loop would be marked down).
    blocking: ClassVar[bool] = False

    @abstractmethod
    def new_episode(self) -> Episode:
        """A fresh episode, not yet reset (unless `create_resets`)."""

    @abstractmethod
    def num_tasks(self) -> int | None:
        """How many task ids exist (`data_idx` in `[0, n)`), or None when unbounded."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the env holds (processes, files); called once at server shutdown, after
        every episode was closed."""

    def prefetch(self, actions: list[str]) -> None:  # noqa: B027 - optional hook
        """Called with the actions of a ZMQ batch's steps before they run, so an env can do
        their expensive part as one batched call (SearchQA: one retrieval for all searches)."""

    def reference_text(self) -> Iterable[str]:
        """Text the env shows its agents beyond what a few random episodes reveal (SearchQA: the
        passages of its corpus). `init-model` trains the tokenizer on it as well, so that names
        the warm-up never met are still whole tokens. Default: none."""
        return ()

    def lexicon(self) -> Iterable[str]:
        """The names an agent copies from its observations into its actions (TextCraft: every
        item name). `init-model` makes each, after a space, one token of the created tokenizer:
        a tiny policy then copies a name as one token rather than letter by letter, as it copies
        the phrases a BPE learns for frequent names. Default: none."""
        return ()

    @classmethod
    def tool_set(cls) -> tuple[Tool, ...]:
        """The tools it offers: those declared, else the generic `act(action)`."""
        return cls.tools or (generic_tool(),)

    @classmethod
    def split_names(cls) -> list[str]:
        """The splits `tasks` serves (default: those of `splits`)."""
        return list(cls.splits)

    @classmethod
    def tasks(cls, split: str, seed: int = 0) -> list[dict[str, str]]:
        """The tasks of split `split`: `{"item_id": "<name>_<data_idx>", "category": str}` rows.
        `seed` lets a computed split vary by run; the default reads `splits` and ignores it."""
        if split not in cls.split_names():
            known = ", ".join(cls.split_names()) or "none"
            raise KeyError(f"env {cls.name!r} has no split {split!r} (its splits: {known})")
        ids = cls.splits[split]
        if isinstance(ids, range):
            return [{"item_id": f"{cls.name}_{i}", "category": cls.category(i)} for i in ids]
        folder = Path(sys.modules[cls.__module__].__file__ or ".").parent
        rows: list[dict[str, str]] = json.loads((folder / ids).read_text())
        return rows

    @classmethod
    def category(cls, data_idx: int) -> str:
        """The eval category of task `data_idx` in a `range` split (default: "all")."""
        return "all"

    def check_data_idx(self, data_idx: int) -> None:
        """Raise `EnvError(BAD_DATA_IDX)` when `data_idx` names no task."""
        n = self.num_tasks()
        if data_idx < 0 or (n is not None and data_idx >= n):
            bound = "non-negative" if n is None else f"in [0, {n})"
            raise EnvError(
                ErrorCode.BAD_DATA_IDX, f"data_idx {data_idx} out of range: must be {bound}"
            )

    def info(self) -> dict[str, Any]:
        """Static metadata served at `GET /info` and by the ZMQ `info` op."""
        return {
            "env": self.name,
            "num_tasks": self.num_tasks(),
            "create_resets": self.create_resets,
            "http_dialect": self.http_dialect,
            "action_format": self.action_format,
            "splits": self.split_names(),
        }
