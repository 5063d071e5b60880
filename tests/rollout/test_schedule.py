"""ScalingInter turn caps as a pure function of the dispatch version."""

from __future__ import annotations

import pytest

from agentgym_rl.config import ScalingInterConfig
from agentgym_rl.episode.types import TurnBudget
from agentgym_rl.rollout.schedule import TurnSchedule


@pytest.mark.parametrize(
    "version, stage, cap",
    [(0, 0, 6), (99, 0, 6), (100, 1, 13), (199, 1, 13), (200, 2, 20), (10_000, 2, 20)],
)
def test_babyai_schedule(version: int, stage: int, cap: int) -> None:
    schedule = TurnSchedule([6, 13, 20], 100)
    assert schedule.budget(version) == TurnBudget(stage, cap)
    assert schedule.stage(version) == stage


def test_pure_function_of_version() -> None:
    schedule = TurnSchedule([2, 3, 4], 5)
    first = [schedule.budget(v) for v in range(30)]
    assert [schedule.budget(v) for v in reversed(range(30))] == first[::-1]
    assert [b.turn_cap for b in first[:16]] == [2] * 5 + [3] * 5 + [4] * 6


def test_fixed_cap_is_one_stage() -> None:
    schedule = TurnSchedule.fixed(15)
    assert {schedule.budget(v) for v in (0, 1, 10**6)} == {TurnBudget(0, 15)}
    assert schedule.max_turn_cap == 15


def test_from_config() -> None:
    config = ScalingInterConfig(turn_caps=[5, 8, 10], versions_per_stage=100)
    assert TurnSchedule.from_config(config).budget(250) == TurnBudget(2, 10)


@pytest.mark.parametrize("stages, k", [([], 1), ([0, 3], 1), ([3], 0)])
def test_rejects_bad_schedules(stages: list[int], k: int) -> None:
    with pytest.raises(ValueError):
        TurnSchedule(stages, k)


def test_rejects_negative_version() -> None:
    with pytest.raises(ValueError):
        TurnSchedule([3], 1).budget(-1)
