"""A plugin env that misbehaves by task (issue 60), served by reference
(`tests.envs.misbehaving:MisbehavingEnvironment`). Task i % 8: 0-2 a fair two-step game ("win"
ends it with reward 1), 3 raises in reset, 4 raises in step, 5 steps to an observation that is
not text, 6 steps to a 10 MB observation, 7 hangs in step for `hang_s` seconds (env option). Every
episode's close raises."""

from __future__ import annotations

import time
from typing import ClassVar

from agentgym_envs.server.base import REACT_RULES, Environment, Episode, StepResult


class MisbehavingEpisode(Episode):
    def __init__(self, hang_s: float) -> None:
        self.hang_s, self.kind = hang_s, 0

    def reset(self, data_idx: int) -> StepResult:
        self.kind = data_idx % 8
        if self.kind == 3:
            raise RuntimeError("reset exploded")
        return StepResult('Say win. Available actions: ["win", "wait"]')

    def step(self, action: str) -> StepResult:
        if self.kind == 4:
            raise ValueError("step exploded")
        if self.kind == 5:
            return StepResult(42)  # type: ignore[arg-type]
        if self.kind == 6:
            return StepResult("x" * (10 << 20))
        if self.kind == 7:
            time.sleep(self.hang_s)
        won = action.strip() == "win"
        return StepResult(
            "You won." if won else "Say win.", reward=float(won), score=float(won), done=won
        )

    def observation(self) -> str:
        return "Say win."

    def available_actions(self) -> list[str]:
        return ["win", "wait"]

    def close(self) -> None:
        raise OSError("close leaked a handle")


class MisbehavingEnvironment(Environment):
    name = "misbehaving"
    description = "A plugin env that raises, hangs and returns the wrong things (tests)"
    system_prompt = "Say win. " + REACT_RULES
    splits: ClassVar[dict[str, str | range]] = {"train": range(0, 800)}

    def __init__(self, hang_s: str = "30") -> None:
        super().__init__()
        self.hang_s = float(hang_s)

    def new_episode(self) -> MisbehavingEpisode:
        return MisbehavingEpisode(self.hang_s)

    def num_tasks(self) -> int | None:
        return None
