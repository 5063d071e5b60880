"""A do-nothing environment for measuring client and protocol overhead (benches, fault tests).

Every step answers at once: observation "ok", no reward, and `done` only for the action "stop".
Task ids are unbounded; `reset(n)` observes "task n".
"""

from __future__ import annotations

from agentgym_envs.server.base import Environment, Episode, StepResult


class NoopEpisode(Episode):
    def __init__(self) -> None:
        self._obs = ""

    def reset(self, data_idx: int) -> StepResult:
        self._obs = f"task {data_idx}"
        return StepResult(self._obs)

    def step(self, action: str) -> StepResult:
        done = action == "stop"
        self._obs = "ok"
        return StepResult("ok", reward=1.0 if done else 0.0, score=1.0 if done else 0.0, done=done)

    def observation(self) -> str:
        return self._obs

    def available_actions(self) -> list[str]:
        return ["noop", "stop"]


class NoopEnvironment(Environment):
    name = "noop"

    def new_episode(self) -> Episode:
        return NoopEpisode()

    def num_tasks(self) -> int | None:
        return None
