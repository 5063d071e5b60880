"""Typed Python views of a decoded group message (the carriers of ``agentgym_wire::schema``).

Arrays are numpy arrays over the message's bytes (read-only when decoded by
``agentgym_rl.wire.codec``); ``truncated``, ``env_failure`` and ``drift`` are plain properties.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt


class Status(str, Enum):
    """Why an episode stopped (mirrors ``Status::as_str`` in Rust)."""

    DONE = "done"
    TURN_CAP = "turn_cap"
    TRUNCATED = "truncated"
    ENV_FAILURE = "env_failure"
    ABORTED = "aborted"


@dataclass(frozen=True)
class WireTokens:
    """Per-token arrays of one sample; ``turn_spans`` has shape ``(turns, 2)``."""

    input_ids: npt.NDArray[np.uint32]
    loss_mask: npt.NDArray[np.uint8]
    logprobs: npt.NDArray[np.float32]
    versions: npt.NDArray[np.uint32]
    turn_spans: npt.NDArray[np.uint32]

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_ids": self.input_ids,
            "loss_mask": self.loss_mask,
            "logprobs": self.logprobs,
            "versions": self.versions,
            "turn_spans": self.turn_spans,
        }


@dataclass(frozen=True)
class WireSample:
    tokens: WireTokens
    reward: float
    status: Status
    drift: bool
    turns: int
    turn_cap: int
    stage: int
    dispatch_version: int
    request_id: str = ""
    """The episode's request id; "" from a writer that did not name it."""
    turn_rewards: npt.NDArray[np.float32] = field(default_factory=lambda: _NO_REWARDS)
    """Per generated turn (schema version 2): the reward it earned, summing to `reward`; empty
    when not given (the whole reward is the last turn's)."""
    turn_keys: npt.NDArray[np.uint32] = field(default_factory=lambda: _NO_KEYS)
    """Per generated turn (schema version 2): a key of the state it acted from; empty when not
    given."""
    episode: int | None = None
    """The place of the sample's episode in its group, when some episode of the group trained as
    several samples (schema version 3; step-wise context, a user agent's segments); None: the
    sample is an episode of its own."""

    @property
    def has_turn_arrays(self) -> bool:
        return bool(self.turn_rewards.size or self.turn_keys.size)

    @property
    def truncated(self) -> bool:
        return self.status is Status.TRUNCATED

    @property
    def env_failure(self) -> bool:
        return self.status is Status.ENV_FAILURE

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens.to_dict(),
            "reward": self.reward,
            "status": self.status.value,
            "drift": self.drift,
            "turns": self.turns,
            "turn_cap": self.turn_cap,
            "stage": self.stage,
            "dispatch_version": self.dispatch_version,
            "request_id": self.request_id,
            "turn_rewards": self.turn_rewards,
            "turn_keys": self.turn_keys,
            "episode": self.episode,
        }


_NO_REWARDS: npt.NDArray[np.float32] = np.zeros(0, np.float32)
_NO_KEYS: npt.NDArray[np.uint32] = np.zeros(0, np.uint32)


@dataclass(frozen=True)
class WireGroup:
    group_id: int
    task_id: str
    env: str
    samples: list[WireSample] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WireGroup:
        """From the dict shape of ``_core.decode_group_dict`` (arrays already numpy)."""
        samples = []
        for s in d["samples"]:
            t = s["tokens"]
            tokens = WireTokens(
                input_ids=t["input_ids"],
                loss_mask=t["loss_mask"],
                logprobs=t["logprobs"],
                versions=t["versions"],
                turn_spans=t["turn_spans"],
            )
            samples.append(
                WireSample(
                    tokens=tokens,
                    reward=float(s["reward"]),
                    status=Status(s["status"]),
                    drift=bool(s["drift"]),
                    turns=int(s["turns"]),
                    turn_cap=int(s["turn_cap"]),
                    stage=int(s["stage"]),
                    dispatch_version=int(s["dispatch_version"]),
                    request_id=str(s.get("request_id", "")),
                    turn_rewards=np.asarray(s.get("turn_rewards", _NO_REWARDS), np.float32),
                    turn_keys=np.asarray(s.get("turn_keys", _NO_KEYS), np.uint32),
                    episode=None if s.get("episode") is None else int(s["episode"]),
                )
            )
        return cls(int(d["group_id"]), str(d["task_id"]), str(d["env"]), samples)

    def to_dict(self) -> dict[str, Any]:
        """The dict shape ``_core.encode_group`` accepts."""
        return {
            "group_id": self.group_id,
            "task_id": self.task_id,
            "env": self.env,
            "samples": [s.to_dict() for s in self.samples],
        }


def episode_ids(rows: Sequence[tuple[int, WireSample]]) -> list[int]:
    """Per row of a step (its group's place, the sample), its episode's place in the step: rows
    of one group that name the same episode (schema version 3: step-wise parts, a user agent's
    segments) share it; a row that names none is an episode of its own."""
    places: dict[tuple[int, int, int], int] = {}
    out = []
    for row, (group, s) in enumerate(rows):
        key = (group, 0, s.episode) if s.episode is not None else (group, 1, row)
        out.append(places.setdefault(key, len(places)))
    return out


def turns_before(rows: Sequence[tuple[int, WireSample]]) -> list[int]:
    """Per row of a step, how many turns its episode's earlier rows hold: the index in its
    episode of the row's first turn (0 for a whole episode; a step-wise part's place)."""
    seen: dict[int, int] = {}
    out = []
    for (_, s), episode in zip(rows, episode_ids(rows), strict=True):
        out.append(seen.get(episode, 0))
        seen[episode] = out[-1] + len(s.tokens.turn_spans)
    return out
