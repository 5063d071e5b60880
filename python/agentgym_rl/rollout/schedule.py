"""ScalingInter-RL: the turn cap of an episode as a pure function of its dispatch version.

Contract: `stage = min(version // versions_per_stage, len(turn_caps) - 1)` and
`turn_cap = turn_caps[stage]`,
where `version` is the policy version the episode's group was admitted under. The result never
depends on wall time, restarts or how many episodes ran before (the reference's resume bug
shifted its schedule one step early; a pure function cannot). A fixed cap is one stage. In a
mixed run an env may have its own schedule (`per_env`); `budget(version, env)` picks it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentgym_rl.config import RolloutConfig, ScalingInterConfig
from agentgym_rl.episode.types import TurnBudget


class TurnSchedule:
    """Maps a policy version to its `TurnBudget`."""

    def __init__(
        self,
        turn_caps: Sequence[int],
        versions_per_stage: int,
        per_env: Mapping[str, TurnSchedule] | None = None,
    ) -> None:
        if not turn_caps or any(c < 1 for c in turn_caps):
            raise ValueError(f"turn_caps must be non-empty and positive, got {list(turn_caps)}")
        if versions_per_stage < 1:
            raise ValueError(f"versions_per_stage must be >= 1, got {versions_per_stage}")
        self.turn_caps = tuple(int(c) for c in turn_caps)
        self.versions_per_stage = int(versions_per_stage)
        self.per_env = dict(per_env or {})

    @classmethod
    def from_config(cls, config: ScalingInterConfig) -> TurnSchedule:
        return cls(config.turn_caps, config.versions_per_stage)

    @classmethod
    def for_rollout(cls, config: RolloutConfig) -> TurnSchedule:
        """The rollout's schedule, with each env's own where it has one."""
        own = {
            env: cls.from_config(config.turn_caps(env))
            for env in config.dataset.envs
            if config.turn_caps(env) is not config.scaling_inter
        }
        return cls(config.scaling_inter.turn_caps, config.scaling_inter.versions_per_stage, own)

    def for_env(self, env: str | None) -> TurnSchedule:
        """The schedule of `env`'s episodes."""
        return self.per_env.get(env, self) if env is not None else self

    @classmethod
    def fixed(cls, turn_cap: int) -> TurnSchedule:
        """A constant turn cap (one stage)."""
        return cls([turn_cap], 1)

    def stage(self, version: int) -> int:
        if version < 0:
            raise ValueError(f"policy versions are non-negative, got {version}")
        return min(version // self.versions_per_stage, len(self.turn_caps) - 1)

    def budget(self, version: int, env: str | None = None) -> TurnBudget:
        schedule = self.for_env(env)
        stage = schedule.stage(version)
        return TurnBudget(stage=stage, turn_cap=schedule.turn_caps[stage])

    @property
    def max_turn_cap(self) -> int:
        """The largest cap of this schedule (an env's own: `for_env(env).max_turn_cap`)."""
        return max(self.turn_caps)
