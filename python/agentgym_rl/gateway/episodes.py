"""Episodes of a user's agent, as the OpenAI-compatible endpoint sees them: calls grouped by an
episode key, token-in/token-out across calls.

Contract:
- An `AgentEpisode` holds one or more `Segment`s, each a `TrajectoryBuilder` plus the messages it
  stands for (the request's messages and each reply as the server issued it). `place(messages,
  tools)` finds the segment a request continues: one that is idle, was rendered with the same
  tools, ends on a reply, and whose messages are a prefix of the request's, the rest being new
  user or tool messages; those are appended as the template's delta for them, so the sampled
  ids of earlier replies stay exactly as sampled. A reply comes back as the client re-serialised
  it (content plus `tool_calls` with JSON-string arguments): it is recognised by its issued ids,
  name and content and by the equality of the parsed arguments, never re-tokenised.
- Anything else starts a new segment rendered from the request's messages (earlier replies in
  it are context, not trained) and is counted by why (`forks`): `concurrent` (the segment it
  continues is generating), `rewrite` (it shares the episode's first messages but an earlier
  message differs: truncated, summarised or edited history) or `branch` (a new conversation in
  the episode, e.g. a sub-agent's). The first request of an episode starts its first segment.
- `reply(segment, generation)` appends the sampled turn verbatim and returns the assistant message
  to send: the text, with the tool calls it writes (per the template family) as `tool_calls`.
- `finish(reward)` ends the episode: every segment with a sampled turn becomes a `_core.Sample`
  carrying the episode's reward (each trains as one sample; see docs/agents.md for how segments
  count in a GRPO group).
"""

from __future__ import annotations

import enum
import itertools
import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym_rl import _core
from agentgym_rl.episode.context import part_id
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.tools import ToolFamily, outside_calls, parse_tool_calls
from agentgym_rl.episode.types import Generation
from agentgym_rl.gateway.text import TextSegment
from agentgym_rl.trajectory import ChatTokenizer, TrajectoryBuilder
from agentgym_rl.wire.types import Status

Message = dict[str, Any]


class Fork(str, enum.Enum):
    """Why a request did not continue a segment of its episode."""

    CONCURRENT = "concurrent"
    REWRITE = "rewrite"
    BRANCH = "branch"


class GatewayError(ValueError):
    """A request the endpoint refuses; `status` is the HTTP status it answers with."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


def _arguments(value: Any) -> Any:
    """Tool-call arguments compared by value: a JSON string is parsed."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def normal(message: Mapping[str, Any]) -> tuple[Any, ...]:
    """What two messages must share to be the same turn (content `None` and `""` alike; tool
    calls by id, name and parsed arguments)."""
    calls = tuple(
        (
            c.get("id"),
            (c.get("function") or {}).get("name"),
            json.dumps(_arguments((c.get("function") or {}).get("arguments")), sort_keys=True),
        )
        for c in message.get("tool_calls") or ()
    )
    return (message.get("role"), message.get("content") or "", calls, message.get("tool_call_id"))


@dataclass
class Segment:
    """One token-consistent part of an episode."""

    builder: TrajectoryBuilder
    known: list[tuple[Any, ...]]
    """`normal` of every message the ids stand for, replies included."""
    tools_key: str
    busy: bool = False
    turns: int = 0

    def continues(self, messages: Sequence[Message], tools_key: str) -> list[Message] | None:
        """The new messages when `messages` continue this segment (see the module docstring)."""
        n = len(self.known)
        if tools_key != self.tools_key or len(messages) <= n or self.known[-1][0] != "assistant":
            return None
        if [normal(m) for m in messages[:n]] != self.known:
            return None
        rest = list(messages[n:])
        return rest if all(m.get("role") in ("user", "tool") for m in rest) else None


@dataclass
class AgentEpisode:
    """One episode of a user's agent; see the module docstring."""

    key: str
    chat: ChatTokenizer
    max_len: int
    version: int
    family: ToolFamily | None = None
    turn_cap: int = 0
    """Calls allowed (0: any number)."""
    stage: int = 0
    sampling: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments of its generate calls (held-out episodes: a temperature)."""
    segments: list[Segment] = field(default_factory=list)
    texts: list[TextSegment] = field(default_factory=list)
    """`/v1/completions` segments (`text.py`)."""
    stop_ids: frozenset[int] = frozenset()
    metrics: RolloutMetrics | None = None
    """Where its generate calls, tokens and forks are counted (None: nowhere)."""
    forks: Counter[str] = field(default_factory=Counter)
    calls: int = 0
    reward: float | None = None
    last_active: float = field(default_factory=time.monotonic)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def busy(self) -> bool:
        """Whether a call of it is generating."""
        return any(s.busy for s in self.segments) or any(t.busy for t in self.texts)

    @property
    def sampled(self) -> bool:
        """Whether any call of it produced a turn."""
        return any(s.turns for s in self.segments) or any(t.turns for t in self.texts)

    def _call(self) -> None:
        if self.reward is not None:
            raise GatewayError(409, f"episode {self.key!r} has ended (its reward was posted)")
        if self.turn_cap and self.calls >= self.turn_cap:
            raise GatewayError(
                400, f"episode {self.key!r} reached its turn cap of {self.turn_cap} calls"
            )
        self.calls += 1
        self.last_active = time.monotonic()

    def place_text(self, prompt: str) -> TextSegment:
        """The completions segment `prompt` continues (its new text appended), or a new one."""
        self._call()
        for seg in reversed(self.texts):
            if not seg.busy and seg.turns and prompt.startswith(seg.text):
                seg.extend(self.chat, prompt[len(seg.text) :])
                seg.busy = True
                return seg
        if self.texts or self.segments:
            self._fork(Fork.BRANCH)
        seg = TextSegment.start(self.chat, prompt, self.version)
        seg.busy = True
        self.texts.append(seg)
        return seg

    def reply_text(self, seg: TextSegment, gen: Generation) -> str:
        """Append a sampled completion to `seg`; its text as returned (stop tokens left out)."""
        seg.busy = False
        text = self.chat.decode([i for i in gen.token_ids if i not in self.stop_ids])
        seg.add(gen, text)
        return text

    def place(self, messages: Sequence[Message], tools: Sequence[Message] | None) -> Segment:
        """The segment `messages` continue (their delta appended), or a new one; marked busy."""
        if not messages:
            raise GatewayError(400, "messages must not be empty")
        self._call()
        tools_key = json.dumps(tools or [], sort_keys=True)
        why, given = Fork.BRANCH, [normal(m) for m in messages]
        for seg in reversed(self.segments):
            rest = seg.continues(messages, tools_key)
            if rest is not None and not seg.busy:
                if not seg.builder.add_observation(rest):
                    raise GatewayError(400, "the conversation exceeds the model's context length")
                seg.known += given[len(seg.known) :]
                seg.busy = True
                return seg
            shared = min(len(seg.known), len(given))
            if seg.busy and seg.known[:shared] == given[:shared]:
                why = Fork.CONCURRENT
            elif why is Fork.BRANCH and seg.known[:2] == given[:2]:
                why = Fork.REWRITE
        return self._new_segment(messages, tools, tools_key, why)

    def _fork(self, why: Fork) -> None:
        self.forks[why.value] += 1
        if self.metrics is not None:
            self.metrics.forks[why.value] += 1

    def _new_segment(
        self, messages: Sequence[Message], tools: Sequence[Message] | None, key: str, why: Fork
    ) -> Segment:
        if self.segments:
            self._fork(why)
        builder = TrajectoryBuilder(
            self.chat,
            list(messages),
            tools=tools,
            max_len=self.max_len,
            prompt_version=self.version,
        )
        if builder.truncated:
            raise GatewayError(400, "the conversation exceeds the model's context length")
        seg = Segment(builder, [normal(m) for m in messages], key, busy=True)
        self.segments.append(seg)
        return seg

    def reply(self, seg: Segment, gen: Generation) -> Message:
        """Append the sampled turn to `seg` and return the assistant message it is."""
        seg.busy = False
        if not gen.token_ids or not seg.builder.add_generated(
            gen.token_ids, gen.logprobs, gen.versions
        ):
            raise GatewayError(400, "the reply exceeds the model's context length")
        seg.turns += 1
        text = self.chat.decode([i for i in gen.token_ids if i not in self.stop_ids])
        message: Message = {"role": "assistant", "content": text}
        if self.family is not None:
            parsed = parse_tool_calls(text, self.family)
            if parsed.calls:
                message["content"] = outside_calls(text, self.family) or None
                message["tool_calls"] = [
                    {
                        "id": f"call_{self.key[-8:]}_{next(self._ids)}",
                        "type": "function",
                        "function": {
                            "name": c.name,
                            "arguments": json.dumps(c.arguments, ensure_ascii=False),
                        },
                    }
                    for c in parsed.calls
                ]
        seg.known.append(normal(message))
        return message

    def release(self, seg: Segment | TextSegment) -> None:
        """A call that failed before its reply: the segment may be continued again."""
        seg.busy = False

    def finish(self, reward: float) -> list[_core.Sample]:
        """End the episode with `reward`: one sample per segment with a sampled turn."""
        if self.reward is not None:
            raise GatewayError(409, f"episode {self.key!r} already has its reward")
        self.reward = float(reward)
        samples: list[_core.Sample] = []
        for seg in self.segments:
            if seg.turns == 0:
                continue
            t = seg.builder.finish()
            samples.append(
                _core.Sample(
                    t.input_ids,
                    t.loss_mask,
                    t.logprobs,
                    t.versions,
                    t.turn_spans,
                    reward=self.reward,
                    status=(Status.TRUNCATED if t.truncated else Status.DONE).value,
                    drift=t.drift,
                    turns=t.turns,
                    turn_cap=self.turn_cap,
                    stage=self.stage,
                    dispatch_version=self.version,
                    request_id=part_id(self.key, len(samples)),
                )
            )
        stops = set(self.stop_ids)
        for text in self.texts:
            if text.turns:
                samples.append(
                    text.sample(
                        self.chat,
                        stops,
                        reward=self.reward,
                        turn_cap=self.turn_cap,
                        stage=self.stage,
                        request_id=part_id(self.key, len(samples)),
                    )
                )
        return samples
