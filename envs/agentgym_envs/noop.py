"""A do-nothing environment for measuring client and protocol overhead (benches, fault tests).

Every step answers at once: observation "ok", no reward, and `done` only for the action "stop".
Task ids are unbounded; `reset(n)` observes "task n". With `--env-option sleep_s=S` every step
blocks for S seconds instead and the env is `blocking` (tests of a slow env, e.g. SciWorld's).
"""

from __future__ import annotations

import time

from agentgym_envs.server.base import REACT_RULES, Environment, EnvOption, Episode, StepResult


class NoopEpisode(Episode):
    def __init__(self, sleep_s: float = 0.0) -> None:
        self._obs = ""
        self._sleep_s = sleep_s

    def reset(self, data_idx: int) -> StepResult:
        self._obs = f"task {data_idx}"
        return StepResult(self._obs)

    def step(self, action: str) -> StepResult:
        if self._sleep_s:
            time.sleep(self._sleep_s)
        done = action == "stop"
        self._obs = "ok"
        return StepResult("ok", reward=1.0 if done else 0.0, score=1.0 if done else 0.0, done=done)

    def observation(self) -> str:
        return self._obs

    def available_actions(self) -> list[str]:
        return ["noop", "stop"]


class NoopEnvironment(Environment):
    name = "noop"
    description = "Answers every step at once (overhead benches)"
    system_prompt = "You are a test agent. " + REACT_RULES
    options = (EnvOption("sleep_s", float, 0.0, "block each step this long", minimum=0.0),)

    def __init__(self, sleep_s: str | float = 0.0) -> None:
        self.sleep_s = float(sleep_s)
        self.blocking = self.sleep_s > 0  # type: ignore[misc]  # per instance, unlike real envs

    def new_episode(self) -> Episode:
        return NoopEpisode(self.sleep_s)

    def num_tasks(self) -> int | None:
        return None
