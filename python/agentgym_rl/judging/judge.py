"""A judge: scores for a group's finished episodes from a model that reads their transcripts.

Contract: `Judge.judge(transcripts)` takes one group's episodes (None for one that cannot be
judged: it ended as an env failure, or no transcript was kept) and returns one `Verdict` per
judged episode (None where it got None). Mode `episode` asks once per episode (concurrently;
the endpoint bounds how many are open); mode `group` asks once for the whole group, the
attempts side by side, and reads a score for each (relative ranking, as RULER does). A reply
that does not parse is asked again once; a second unreadable reply, or an endpoint that stays
down (`client.JudgeUnavailable`), raises `JudgeFailed` for the whole group, never a silent 0.
`JudgeCounters` counts calls, retries, unreadable replies, failed groups, tokens and time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from agentgym_rl.judging.client import Completion, JudgeUnavailable
from agentgym_rl.judging.rubric import (
    MESSAGE_CHARS,
    JudgeReplyError,
    Transcript,
    episode_prompt,
    group_prompt,
    group_regex,
    parse_score,
    parse_scores,
    score_regex,
)

JudgeMode = Literal["episode", "group"]
T = TypeVar("T")
PARSE_TRIES = 2
"""An unreadable reply is asked again once."""


class Endpoint(Protocol):
    """What a judge asks (`client.ChatEndpoint` is one)."""

    async def complete(
        self, prompt: str, *, max_tokens: int, temperature: float = 0.0, regex: str | None = None
    ) -> Completion: ...


class JudgeFailed(RuntimeError):
    """A group could not be judged: the endpoint stayed down, or its replies did not parse."""

    def __init__(self, kind: Literal["unavailable", "unparsable"], message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Verdict:
    """One episode's judged score and how it came about."""

    score: float
    mode: JudgeMode
    prompt: str
    reply: str

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "mode": self.mode, "prompt": self.prompt, "reply": self.reply}


@dataclass
class JudgeCounters:
    """Totals since start (one event loop, no locks)."""

    calls: int = 0
    retries: int = 0
    """Requests repeated after a failed one (the endpoint's backoff)."""
    unparsed: int = 0
    """Replies that held no readable score."""
    judged: int = 0
    """Episodes given a score."""
    failed_groups: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    """Time spent waiting on the judge, summed over calls."""

    def add(self, done: Completion, seconds: float) -> None:
        self.calls += 1
        self.retries += done.attempts - 1
        self.prompt_tokens += done.prompt_tokens
        self.completion_tokens += done.completion_tokens
        self.seconds += seconds

    def snapshot(self) -> dict[str, float | int]:
        return {
            "judge_calls": self.calls,
            "judge_retries": self.retries,
            "judge_unparsed": self.unparsed,
            "judged_episodes": self.judged,
            "judge_failed_groups": self.failed_groups,
            "judge_prompt_tokens": self.prompt_tokens,
            "judge_completion_tokens": self.completion_tokens,
            "judge_seconds": round(self.seconds, 3),
        }


class Judge:
    """See the module docstring."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        mode: JudgeMode = "episode",
        rubric: str | None = None,
        max_tokens: int = 64,
        temperature: float = 0.0,
        guided: bool = False,
        message_chars: int = MESSAGE_CHARS,
        counters: JudgeCounters | None = None,
    ) -> None:
        self.endpoint, self.mode, self.rubric = endpoint, mode, rubric
        self.message_chars = message_chars
        self.max_tokens, self.temperature, self.guided = max_tokens, temperature, guided
        self.counters = counters if counters is not None else JudgeCounters()

    async def judge(
        self, transcripts: Sequence[Transcript | None], reference: str | None = None
    ) -> list[Verdict | None]:
        judged = [k for k, t in enumerate(transcripts) if t is not None]
        verdicts: list[Verdict | None] = [None] * len(transcripts)
        if not judged:
            return verdicts
        ts = [t for t in transcripts if t is not None]
        try:
            if self.mode == "group":
                scored = await self._group(ts, reference)
            else:
                scored = list(await asyncio.gather(*(self._episode(t, reference) for t in ts)))
        except JudgeFailed:
            self.counters.failed_groups += 1
            raise
        for k, verdict in zip(judged, scored, strict=True):
            verdicts[k] = verdict
        self.counters.judged += len(scored)
        return verdicts

    async def score(self, t: Transcript, reference: str | None = None) -> Verdict:
        """One episode scored alone, whatever the mode (evaluation's episodes have no group)."""
        try:
            verdict = await self._episode(t, reference)
        except JudgeFailed:
            self.counters.failed_groups += 1
            raise
        self.counters.judged += 1
        return verdict

    async def _episode(self, t: Transcript, reference: str | None) -> Verdict:
        prompt = episode_prompt(self.rubric, t, reference, self.message_chars)
        regex = score_regex() if self.guided else None
        reply, score = await self._ask(prompt, parse_score, regex)
        return Verdict(score, "episode", prompt, reply)

    async def _group(self, ts: list[Transcript], reference: str | None) -> list[Verdict]:
        prompt = group_prompt(self.rubric, ts, reference, self.message_chars)
        regex = group_regex(len(ts)) if self.guided else None
        reply, scores = await self._ask(prompt, lambda text: parse_scores(text, len(ts)), regex)
        return [Verdict(s, "group", prompt, reply) for s in scores]

    async def _ask(
        self, prompt: str, parse: Callable[[str], T], regex: str | None
    ) -> tuple[str, T]:
        why = ""
        for _ in range(PARSE_TRIES):
            started = time.monotonic()
            try:
                done = await self.endpoint.complete(
                    prompt, max_tokens=self.max_tokens, temperature=self.temperature, regex=regex
                )
            except JudgeUnavailable as e:
                raise JudgeFailed("unavailable", str(e)) from None
            self.counters.add(done, time.monotonic() - started)
            try:
                return done.text, parse(done.text)
            except JudgeReplyError as e:
                self.counters.unparsed += 1
                why = str(e)
        raise JudgeFailed("unparsable", f"the judge's reply did not parse twice: {why}")
