"""Rollout metrics: rates, engine idle ratio, turns, staleness (records: tests/rollout)."""

from __future__ import annotations

import numpy as np

from agentgym_rl import _core
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.outcome import is_success, reward_of


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def sample(status: str, turns: int, version: int = 0, reward: float = 0.0) -> _core.Sample:
    n = 4
    return _core.Sample(
        np.arange(n, dtype=np.uint32),
        np.array([0, 1, 1, 0], np.uint8),
        np.zeros(n, np.float32),
        np.full(n, version, np.uint32),
        np.array([1, 3], np.uint32),
        reward=reward,
        status=status,
        turns=turns,
    )


def test_idle_ratio_rates_and_histograms() -> None:
    clock = Clock()
    m = RolloutMetrics(clock)
    with m.generating(300):  # two overlapping calls count once: busy 2 s of 10 s
        with m.generating(100):
            clock.t += 2.0
    assert (m.generate_calls, m.prompt_tokens) == (2, 400)
    clock.t += 8.0
    m.generated_tokens, m.env_steps = 500, 40
    m.record_episode(sample("done", 3), "babyai")
    m.record_episode(sample("env_failure", 7), "babyai")
    m.record_sent(_core.Group(1, "t", "noop", [sample("done", 1, version=2)]), learner_version=5)
    record = m.snapshot({"running": 2})
    assert abs(record["engine_idle_ratio"] - 0.8) < 1e-9
    assert record["generated_tokens_per_s"] == 50.0 and record["env_steps_per_s"] == 4.0
    assert (record["turns_mean"], record["turns_max"], record["env_failures"]) == (5.0, 7, 1)
    assert record["statuses"] == {"done": 1, "env_failure": 1}
    assert record["staleness"] == {"3": 1} and record["buffer"] == {"running": 2}
    clock.t += 10.0  # an interval without generation is fully idle, rates restart
    second = m.snapshot()
    assert second["engine_idle_ratio"] == 1.0 and second["generated_tokens_per_s"] == 0.0


def test_sciworld_counts_only_completed_tasks_as_successes() -> None:
    """SciWorld's partial credit is reward (score / 100) but not success; other envs: reward > 0."""
    assert reward_of("sciworld", 100.0) == 1.0 and reward_of("sciworld", -100.0) == -1.0
    assert reward_of("babyai", 0.7) == 0.7
    assert is_success("sciworld", 1.0) and not is_success("sciworld", reward_of("sciworld", 75))
    assert is_success("babyai", 0.1) and not is_success("babyai", 0.0)
    assert not is_success("textcraft", 1.0, env_failure=True)
    m = RolloutMetrics()
    m.record_episode(sample("done", 3, reward=0.75), "sciworld")
    m.record_episode(sample("done", 3, reward=0.75), "babyai")
    assert m.successes == 1
