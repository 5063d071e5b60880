"""The environment interface every served env implements, and the errors the server reports.

An `Environment` is a factory of `Episode`s plus static metadata. The server (`table.py`) owns
the id -> episode map, so an env implementation never sees ids, sockets or timeouts: it turns
`reset(data_idx)` and `step(action)` into a `StepResult`.
"""

from __future__ import annotations

import enum
import random
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar


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


class EnvUnavailable(RuntimeError):
    """The env cannot run on this machine (a system package is missing); the message says how to
    get it. The server reports it and exits 1 instead of starting."""


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

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources. Called once when the episode is closed or reaped."""


class Environment(ABC):
    """An env as the server sees it: an episode factory plus metadata."""

    name: ClassVar[str]
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
        }
