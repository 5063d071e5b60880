"""ScalingInter-RL: the turn cap of an episode as a pure function of its dispatch version.

Contract: `stage = min(version // versions_per_stage, len(turn_caps) - 1)` and
`turn_cap = turn_caps[stage]`,
where `version` is the policy version the episode's group was admitted under. The result never
depends on wall time, restarts or how many episodes ran before (the reference's resume bug
shifted its schedule one step early; a pure function cannot). A fixed cap is one stage.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentgym_rl.config import ScalingInterConfig
from agentgym_rl.episode.types import TurnBudget


class TurnSchedule:
    """Maps a policy version to its `TurnBudget`."""

    def __init__(self, turn_caps: Sequence[int], versions_per_stage: int) -> None:
        if not turn_caps or any(c < 1 for c in turn_caps):
            raise ValueError(f"turn_caps must be non-empty and positive, got {list(turn_caps)}")
        if versions_per_stage < 1:
            raise ValueError(f"versions_per_stage must be >= 1, got {versions_per_stage}")
        self.turn_caps = tuple(int(c) for c in turn_caps)
        self.versions_per_stage = int(versions_per_stage)

    @classmethod
    def from_config(cls, config: ScalingInterConfig) -> TurnSchedule:
        return cls(config.turn_caps, config.versions_per_stage)

    @classmethod
    def fixed(cls, turn_cap: int) -> TurnSchedule:
        """A constant turn cap (one stage)."""
        return cls([turn_cap], 1)

    def stage(self, version: int) -> int:
        if version < 0:
            raise ValueError(f"policy versions are non-negative, got {version}")
        return min(version // self.versions_per_stage, len(self.turn_caps) - 1)

    def budget(self, version: int) -> TurnBudget:
        stage = self.stage(version)
        return TurnBudget(stage=stage, turn_cap=self.turn_caps[stage])

    @property
    def max_turn_cap(self) -> int:
        return max(self.turn_caps)
