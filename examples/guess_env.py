"""Guess the number: find a secret number from 1 to 10, told "higher" or "lower" after each try."""

import random

from agentgym_envs.server.base import REACT_RULES, Environment, Episode, StepResult


class GuessEpisode(Episode):
    def reset(self, data_idx: int) -> StepResult:
        self.secret = random.Random(data_idx).randint(1, 10)
        self.last = "Guess the secret number. Available actions: 1, 2, ..., 10."
        return StepResult(self.last)

    def step(self, action: str) -> StepResult:
        if action.strip() not in self.available_actions():
            return StepResult(f"{action!r} is not a number from 1 to 10.", invalid=True)
        guess, won = int(action), int(action) == self.secret
        self.last = (
            "Right!" if won else f"{guess} is too {'low' if guess < self.secret else 'high'}."
        )
        return StepResult(self.last, reward=float(won), score=float(won), done=won)

    def observation(self) -> str:
        return self.last

    def available_actions(self) -> list[str]:
        return [str(n) for n in range(1, 11)]


class GuessEnvironment(Environment):
    name = "guess"
    description = "Find a secret number from 1 to 10, told higher or lower after each guess"
    system_prompt = "Find the secret number from 1 to 10. " + REACT_RULES
    splits = {"train": range(0, 1000), "test": range(1000, 1200)}

    def new_episode(self) -> GuessEpisode:
        return GuessEpisode()

    def num_tasks(self) -> int | None:
        return None
