"""How many groups run at once, sized from what the rollout server measures
(`buffer.in_flight: auto`).

Little's law: an episode spends a share p of its life with a request in the engine (the rest in
env steps and the loop's own work); E episodes in flight keep p * E requests in the engine on
average. The engine is fed when that average reaches `target` requests (its batch,
`max_num_seqs`), so E = target / p episodes, that is E / group_size groups, kept between `floor`
(one learner step's groups) and `ceiling` (the config's `max_in_flight`, the memory bound). p is
measured over each window as the time integral of requests in the engine over that of live
episodes (`RolloutMetrics`), smoothed across windows. A fixed cap is right for one env latency
only: 16 groups keep the engine busy at 40 ms steps and leave it idle at 500 ms.

The staleness bound is not loosened: the buffer still admits no group past its staleness budget,
whatever the cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class InFlightSizer:
    group_size: int
    floor: int
    ceiling: int
    target: int
    """Requests the engine should hold on average (its batch)."""
    smoothing: float = 0.5
    """Weight of the past in the share's running estimate (0: the last window alone)."""
    share: float | None = None
    """The running estimate of p, the share of an episode's life spent in the engine."""

    def __post_init__(self) -> None:
        if not 1 <= self.floor <= self.ceiling or self.group_size < 1 or self.target < 1:
            raise ValueError(
                f"in-flight sizing needs 1 <= floor <= ceiling and a positive group size and "
                f"target: floor {self.floor}, ceiling {self.ceiling}, group size "
                f"{self.group_size}, target {self.target}"
            )

    @property
    def first(self) -> int:
        """The cap before anything is measured: as if every episode were always in the engine."""
        return self._groups(1.0)

    def size(self, request_seconds: float, episode_seconds: float) -> int | None:
        """The cap for the next window, from this window's integrals (request-seconds in the
        engine, episode-seconds alive); None when the window saw no episode (keep the cap)."""
        if episode_seconds <= 0.0:
            return None
        p = min(1.0, max(0.0, request_seconds / episode_seconds))
        past = self.share
        self.share = p if past is None else self.smoothing * past + (1 - self.smoothing) * p
        return self._groups(self.share)

    def _groups(self, share: float) -> int:
        if share <= 0.0:
            return self.ceiling
        episodes = self.target / share
        return max(self.floor, min(self.ceiling, math.ceil(episodes / self.group_size)))
