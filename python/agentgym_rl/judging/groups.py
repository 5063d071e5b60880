"""A group's finished episodes, judged and rescored: what the dispatcher awaits before a judged
env's group goes to the buffer.

Contract: `GroupJudge.rescore(played)` takes one group's `Played` episodes in order, asks the
judge (`judge.Judge`) about each one that can be judged (a training agent's episode that did not
end as an env failure) and returns them with their samples rebuilt from the judged score
(`EpisodeState.samples(judged=...)`: the env's `reward` settings say how the score becomes a
reward and a success) and the verdict kept (`Played.judged`: score, mode, prompt, reply). An
episode that cannot be judged keeps its env reward. Raises `judge.JudgeFailed` when the group
cannot be judged; the dispatcher then drops the group, counted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from agentgym_rl.episode.agent import Played
from agentgym_rl.episode.outcome import judged_score
from agentgym_rl.judging.judge import Judge, JudgeCounters
from agentgym_rl.judging.rubric import Transcript
from agentgym_rl.wire.types import Status


def transcript_of(played: Played) -> Transcript | None:
    """What a judge reads of an episode; None when it cannot be judged."""
    state = played.state
    if state is None or state.status in (None, Status.ENV_FAILURE):
        return None
    return Transcript(state.first_observation, tuple(state.exchanges))


class GroupJudge:
    """One env's judge, applied to whole groups."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge

    @property
    def counters(self) -> JudgeCounters:
        return self.judge.counters

    async def rescore(self, played: Sequence[Played], reference: str | None = None) -> list[Played]:
        """The group's episodes rescored by the judge (shown the task's `reference` answer where
        its split gives one)."""
        verdicts = await self.judge.judge([transcript_of(p) for p in played], reference)
        rescored = []
        for p, verdict in zip(played, verdicts, strict=True):
            if verdict is None or p.state is None:
                rescored.append(p)
                continue
            env_reward = float(p.sample.reward)
            samples = p.state.samples(judged=verdict.score)
            env = p.state.plan.task.env
            _, success = judged_score(env, env_reward, verdict.score, p.state.spec.reward)
            judged = {**verdict.to_dict(), "success": success, "env_reward": env_reward}
            rescored.append(dataclasses.replace(p, samples=samples, judged=judged))
        return rescored


def judge_counters(judges: Mapping[str, GroupJudge]) -> dict[str, float | int]:
    """Every judge's counters, summed (judges shared by several envs counted once)."""
    seen: dict[int, JudgeCounters] = {id(j.counters): j.counters for j in judges.values()}
    total: dict[str, float | int] = {}
    for counters in seen.values():
        for key, value in counters.snapshot().items():
            total[key] = total.get(key, 0) + value
    return total
