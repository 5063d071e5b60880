"""A tiny environment of a user's own, as `serve_env` serves it by reference: say the number the
task asks for (task n asks for n % 3 + 1); the episode ends at the first answer."""

from __future__ import annotations

from agentgym_envs.server.base import Environment, Episode, StepResult


class GuessEpisode(Episode):
    def __init__(self) -> None:
        self.target, self._obs = 0, ""

    def reset(self, data_idx: int) -> StepResult:
        self.target = data_idx % 3 + 1
        self._obs = f"Say the number {self.target}. Available actions: 1, 2, 3"
        return StepResult(self._obs)

    def step(self, action: str) -> StepResult:
        right = action.strip() == str(self.target)
        self._obs = "right" if right else "wrong"
        return StepResult(self._obs, reward=float(right), score=float(right), done=True)

    def observation(self) -> str:
        return self._obs

    def available_actions(self) -> list[str]:
        return ["1", "2", "3"]


class GuessEnvironment(Environment):
    name = "guess"

    def new_episode(self) -> Episode:
        return GuessEpisode()

    def num_tasks(self) -> int | None:
        return None
