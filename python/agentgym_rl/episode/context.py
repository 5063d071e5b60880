"""What each turn of an episode reads, and the trajectories it trains as.

Contract: an episode's context is made once from its prefix (system prompt, first observation)
by `episode_context(builds, prefix, history_turns)`; `Builds` holds what every builder of the
episode shares (the chat template, tools, context limit, stop ids, drift check, version).
Per turn, `ids` is the engine's prompt (token-in) and `remaining` the tokens left before the
context limit; `add_generated(ids, logprobs, versions)` appends the sampled turn verbatim (False:
it did not fit) and `add_reply(text, messages)` what answered it (`text`: the turn's decoded
reply; False: it did not fit). `parts()` are the finished trajectories the episode trains as, in
turn order, at least one.

- `FullHistory` (`context.history_turns: full`, the default): one builder over the whole
  episode, one part; every turn re-reads everything before it, token for token.
- `RecentTurns(k)`: each turn's prompt is the prefix and the last k turns (each the reply, as
  text, and the messages that answered it), rendered by the chat template; the turn's part is that
  prompt, masked, then exactly the sampled ids. A turn older than k is not read again, so prompts
  stay bounded however long the episode runs; each part trains as its own sample of the episode.

`recent(messages, starts, turns)` is the same window over a text episode's messages (for policies
that are sent messages: evaluation over an API or a function).

`part_id(request_id, k)` names an episode's k-th part: the episode's request id for the first, then
`<request id>/s<k>`, for step-wise parts and a user agent's segments alike (`gateway/episodes.py`):
a trained part joins its episode by the prefix.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from agentgym_rl.trajectory import ChatTokenizer, Message, Trajectory, TrajectoryBuilder

M = TypeVar("M")


def part_id(request_id: str, k: int) -> str:
    """The request id of an episode's k-th part (see the module docstring)."""
    return request_id if k == 0 else f"{request_id}/s{k}"


def recent(messages: Sequence[M], starts: Sequence[int], turns: int | None) -> list[M]:
    """`messages` (the prefix, then per turn the reply and what answered it; `starts[i]` the index
    of turn i's reply) with only the last `turns` turns after the prefix (None: all)."""
    if turns is None or len(starts) <= turns:
        return list(messages)
    return [*messages[: starts[0]], *messages[starts[-turns] :]]


@dataclass(frozen=True)
class Builds:
    """What every builder of one episode shares (see `TrajectoryBuilder`)."""

    chat: ChatTokenizer
    tools: Sequence[Message] | None
    max_len: int
    stop_ids: Sequence[int]
    check_drift: bool
    prompt_version: int

    def builder(self, messages: Sequence[Message]) -> TrajectoryBuilder:
        return TrajectoryBuilder(
            self.chat,
            list(messages),
            tools=self.tools,
            max_len=self.max_len,
            stop_ids=self.stop_ids,
            check_drift=self.check_drift,
            prompt_version=self.prompt_version,
        )


def episode_context(
    builds: Builds, prefix: Sequence[Message], history_turns: int | None
) -> EpisodeContext:
    """The episode's context: the whole history (None) or the last `history_turns` turns."""
    if history_turns is None:
        return FullHistory(builds.builder(prefix))
    return RecentTurns(builds, prefix, turns=history_turns)


class FullHistory:
    """The whole history in every prompt: one builder, one part."""

    def __init__(self, builder: TrajectoryBuilder) -> None:
        self.builder = builder

    @property
    def ids(self) -> npt.NDArray[np.uint32]:
        return self.builder.ids

    @property
    def remaining(self) -> int:
        return self.builder.remaining

    def add_generated(
        self, ids: Sequence[int], logprobs: Sequence[float], versions: list[int]
    ) -> bool:
        return self.builder.add_generated(ids, logprobs, versions)

    def add_reply(self, text: str, messages: Sequence[Message]) -> bool:
        del text  # the builder holds the sampled ids themselves
        return self.builder.add_observation(messages)

    def parts(self) -> list[Trajectory]:
        return [self.builder.finish()]


class RecentTurns:
    """The prefix and the last `turns` turns in every prompt: one part per turn."""

    def __init__(self, builds: Builds, prefix: Sequence[Message], *, turns: int) -> None:
        if turns < 1:
            raise ValueError(f"a window of {turns} turns leaves out the last observation")
        self.builds, self.prefix = builds, list(prefix)
        self._history: deque[list[Message]] = deque(maxlen=turns)
        self._builder: TrajectoryBuilder | None = None
        self._parts: list[Trajectory] = []

    def _current(self) -> TrajectoryBuilder:
        """The next turn's builder: its prompt rendered from the prefix and the window."""
        if self._builder is None:
            window = (m for turn in self._history for m in turn)
            self._builder = self.builds.builder([*self.prefix, *window])
        return self._builder

    @property
    def ids(self) -> npt.NDArray[np.uint32]:
        return self._current().ids

    @property
    def remaining(self) -> int:
        return self._current().remaining

    def add_generated(
        self, ids: Sequence[int], logprobs: Sequence[float], versions: list[int]
    ) -> bool:
        builder = self._current()
        if not builder.add_generated(ids, logprobs, versions):
            return False
        self._parts.append(builder.finish())
        self._builder = None
        return True

    def add_reply(self, text: str, messages: Sequence[Message]) -> bool:
        self._history.append([{"role": "assistant", "content": text}, *messages])
        return True  # a window too long for the context shows as no room for the next turn

    def parts(self) -> list[Trajectory]:
        # an episode that never finished a turn trains as its prompt alone (nothing trained)
        return list(self._parts) or [self._current().finish()]


EpisodeContext = FullHistory | RecentTurns
