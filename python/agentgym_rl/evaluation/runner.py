"""The evaluation loop: every task of a split `n` times through one `Policy`, bounded concurrency.

Contract: `run_episodes(policy, tasks, settings)` runs `len(tasks) * settings.n` episodes (at
most `settings.concurrency` at once), each with a turn cap of `settings.turn_cap`, and returns
one `EvalRecord` per episode in (task, sample) order. Success is the env's own rule
(`episode/outcome.py`: `reward > 0` for most; SciWorld: the task completed), or `reward >
success_threshold` when one is set. An episode that raises is not retried: it is
recorded as a failure with status "error" and logged, so one bad task never hides the others;
an `EvalError` stops the run instead. An episode that ended as an env failure keeps the reason
its policy gave (`EvalRecord.failure`). `on_episode(record)` is called as each episode ends
(progress bars). A `Policy` owns how turns are produced (token-in/token-out through the training
agent loop, or chat text over HTTP). With a `judge`, each episode that reports its transcript
and did not end as an env failure is scored by it too (`EvalRecord.judged`); a judge that fails
an episode leaves it unjudged (logged), never a 0.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentgym_rl.config.evaluate import EvalError
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.outcome import is_success
from agentgym_rl.episode.scoring import EvalRecord
from agentgym_rl.judging.judge import Judge, JudgeFailed
from agentgym_rl.judging.rubric import Transcript

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EpisodeOutcome:
    """What a policy reports for one finished episode."""

    reward: float
    status: str
    turns: int
    failure: str | None = None
    """Why the episode ended as an env failure (`episode.turn.env_failure`); None otherwise."""
    messages: tuple[dict[str, Any], ...] = ()
    """The chat messages of the episode (text policies; the token-level agent logs its own);
    in tool mode with `tool_calls` and `role: tool` messages."""
    runaway_turns: int | None = None
    """Turns that ran to the token cap without a parsable action (the token-level agent)."""
    transcript: Transcript | None = None
    """The episode as a judge reads it (None: not kept)."""


class Policy(Protocol):
    """Plays one episode of `task` against the env servers and reports how it went."""

    async def episode(self, task: Task, *, turn_cap: int, request_id: str) -> EpisodeOutcome:
        """Run one episode of `task` with at most `turn_cap` turns."""
        ...

    async def aclose(self) -> None:
        """Release what the policy holds (HTTP client, log files); not the engine or pool."""
        ...


@dataclass(frozen=True, slots=True)
class EvalSettings:
    """How many samples, how long and how many at once."""

    turn_cap: int
    n: int = 1
    concurrency: int = 32
    success_threshold: float | None = None
    """Success is `reward >` this; None: the env's own rule (`episode/outcome.py`)."""

    def __post_init__(self) -> None:
        for name in ("turn_cap", "n", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")


async def run_episodes(
    policy: Policy,
    tasks: Sequence[Task],
    settings: EvalSettings,
    *,
    run_id: str = "eval",
    on_episode: Callable[[EvalRecord], None] | None = None,
    judge: Judge | None = None,
) -> list[EvalRecord]:
    """One record per (task, sample), in that order; see the module docstring."""
    gate = asyncio.Semaphore(settings.concurrency)

    async def one(task: Task, k: int) -> EvalRecord:
        async with gate:
            rid = f"{run_id}-{task.item_id}-s{k}"
            failure: str | None = None
            turns = runaway = None
            judged: float | None = None
            try:
                out = await policy.episode(task, turn_cap=settings.turn_cap, request_id=rid)
                reward, status, failure = out.reward, out.status, out.failure
                turns, runaway = out.turns, out.runaway_turns
            except (asyncio.CancelledError, EvalError):
                raise
            except Exception:
                log.exception("episode %s failed; counted as a failure", rid)
                reward, status = 0.0, "error"
            else:
                judged = await _judged(judge, out, rid, task.reference)
        rec = EvalRecord(
            env=task.env,
            category=task.category,
            item_id=task.item_id,
            success=(
                is_success(task.env, reward)
                if settings.success_threshold is None
                else reward > settings.success_threshold
            ),
            reward=reward,
            status=status,
            failure=failure,
            turns=turns,
            runaway_turns=runaway,
            judged=judged,
        )
        if on_episode is not None:
            on_episode(rec)
        return rec

    return list(await asyncio.gather(*(one(t, k) for t in tasks for k in range(settings.n))))


async def _judged(
    judge: Judge | None, out: EpisodeOutcome, rid: str, reference: str | None
) -> float | None:
    if judge is None or out.transcript is None or out.status == "env_failure":
        return None
    try:
        return (await judge.score(out.transcript, reference)).score
    except JudgeFailed as e:
        log.warning("episode %s: not judged: %s", rid, e)
        return None
