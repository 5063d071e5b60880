"""What a judge reads and what it must answer.

Contract: a `Transcript` is one finished episode as text: the env's first message (the task),
then per turn the policy's reply and what came back. `episode_prompt(rubric, t, reference)`
fills a per-episode rubric's `{task}`, `{transcript}` and `{reference}`; `group_prompt(rubric,
ts, reference)` a group rubric's `{task}`, `{attempts}` (the episodes numbered 1..n), `{n}` and
`{reference}`. A judge answers a per-episode prompt with a line `SCORE: x` and a group prompt with
one line `k: x` per attempt, x in [0, 1]; `parse_score` and `parse_scores` read them (the last
`SCORE` wins, so reasoning may come first) and raise `JudgeReplyError` for anything else: no
score, a score outside [0, 1], a group reply that leaves an attempt out or scores one twice.
`score_regex()` and `group_regex(n)` are those formats as regular expressions, for an engine's
guided decoding (then every reply parses).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agentgym_rl.episode.clipping import clip_middle

EPISODE_RUBRIC = """You judge whether an agent completed a task in a text environment.

The task, as the environment first described it:
{task}

What the agent did, turn by turn:
{transcript}
{reference}
Did the agent complete the task? Answer with one line `SCORE: x`, where x is a number from 0
(not completed) to 1 (completed)."""

GROUP_RUBRIC = """You compare {n} attempts by an agent at the same task in a text environment.

The task, as the environment first described it:
{task}
{reference}
{attempts}

Score each attempt by how well it completed the task, from 0 (not at all) to 1 (completed),
relative to the others. Answer with {n} lines, one per attempt, `k: x` (attempt number, score)."""

REFERENCE_LINE = "\nA reference answer: {reference}\n"
MESSAGE_CHARS = 1500
"""The most of one message a judge reads by default (its head and tail): a judge's context is
small (`JudgeConfig.message_chars`)."""

_NUMBER = r"(0(\.\d{1,3})?|1(\.0{1,3})?)"
"""A score as guided decoding writes it: at most three decimals, so that a line ends."""
_SCORE = re.compile(r"SCORE\s*:\s*\**\s*(-?\d*\.?\d+)", re.IGNORECASE)
_LINE = re.compile(r"^\s*(?:attempt\s*)?(\d+)\s*[:=]\s*(-?\d*\.?\d+)\s*$", re.IGNORECASE | re.M)


class JudgeReplyError(ValueError):
    """A judge's reply holds no readable score (or not one per attempt)."""


@dataclass(frozen=True, slots=True)
class Transcript:
    """One finished episode as a judge reads it."""

    task: str
    """The env's first observation."""
    turns: tuple[tuple[str, str], ...]
    """Per turn: the policy's reply, then what came back (the env's observation, or the
    parser's feedback on a turn that named no action)."""

    def render(self, chars: int = MESSAGE_CHARS) -> str:
        """The turns, each message clipped to `chars` (its head and tail)."""
        if not self.turns:
            return "(the episode ended before the agent acted)"
        lines = []
        for k, (reply, came_back) in enumerate(self.turns, 1):
            lines.append(f"Turn {k}, the agent: {_clip(reply, chars)}")
            lines.append(f"Turn {k}, the environment: {_clip(came_back, chars)}")
        return "\n".join(lines)


def episode_prompt(
    rubric: str | None, t: Transcript, reference: str | None = None, chars: int = MESSAGE_CHARS
) -> str:
    """The per-episode judge prompt (`EPISODE_RUBRIC` when `rubric` is None), each message
    clipped to `chars`."""
    return (rubric or EPISODE_RUBRIC).format(
        task=_clip(t.task, chars), transcript=t.render(chars), reference=_reference(reference)
    )


def group_prompt(
    rubric: str | None,
    ts: Sequence[Transcript],
    reference: str | None = None,
    chars: int = MESSAGE_CHARS,
) -> str:
    """The group judge prompt: the attempts of one task, numbered from 1."""
    if not ts:
        raise ValueError("a group prompt needs at least one attempt")
    attempts = "\n\n".join(f"Attempt {k}:\n{t.render(chars)}" for k, t in enumerate(ts, 1))
    return (rubric or GROUP_RUBRIC).format(
        task=_clip(ts[0].task, chars),
        attempts=attempts,
        n=len(ts),
        reference=_reference(reference),
    )


def parse_score(reply: str) -> float:
    """The last `SCORE: x` of a reply, x in [0, 1]."""
    found = _SCORE.findall(reply)
    if not found:
        raise JudgeReplyError(f"no `SCORE: x` in the reply {_clip(reply, 200)!r}")
    return _in_range(found[-1], reply)


def parse_scores(reply: str, n: int) -> list[float]:
    """One score per attempt 1..n from `k: x` lines."""
    scores: dict[int, float] = {}
    for k, x in _LINE.findall(reply):
        attempt = int(k)
        if not 1 <= attempt <= n:
            raise JudgeReplyError(f"attempt {attempt} scored, but there are {n}")
        if attempt in scores:
            raise JudgeReplyError(f"attempt {attempt} scored twice in {_clip(reply, 200)!r}")
        scores[attempt] = _in_range(x, reply)
    missing = [k for k in range(1, n + 1) if k not in scores]
    if missing:
        raise JudgeReplyError(f"attempts {missing} have no `k: x` line in {_clip(reply, 200)!r}")
    return [scores[k] for k in range(1, n + 1)]


def score_regex() -> str:
    """`parse_score`'s format, for guided decoding."""
    return f"SCORE: {_NUMBER}"


def group_regex(n: int) -> str:
    """`parse_scores`'s format for `n` attempts, for guided decoding."""
    return "\n".join(f"{k}: {_NUMBER}" for k in range(1, n + 1))


def _in_range(text: str, reply: str) -> float:
    x = float(text)
    if not 0.0 <= x <= 1.0:
        raise JudgeReplyError(f"score {text} is outside [0, 1] in {_clip(reply, 200)!r}")
    return x


def _reference(reference: str | None) -> str:
    return REFERENCE_LINE.format(reference=reference) if reference else ""


def _clip(text: str, limit: int = MESSAGE_CHARS) -> str:
    return clip_middle(text, limit)
