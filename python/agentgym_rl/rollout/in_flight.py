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

The batch the engine can hold is also bounded by its KV cache: a request keeps its whole context
there while it generates, so at most `kv_tokens / tokens per request` run at once; the target is
the smaller of the two. Past it, vLLM preempts running requests and computes them again: SmolLM2
in float32 on a 2,048 MiB cache (~45k tokens of ~600-token requests: ~75 at once against a batch
of 128) made 14 tokens/s with `auto` sized by the batch alone (up to 64 groups) against 35 at its
config's fixed cap (benches/bench_model.py's first run; the bound has not been measured there
since). What it bounds is the requests running; the episodes waiting on their env keep only
evictable cached prefixes, and where the share p is small their prefixes together can outgrow
the cache (each next turn then computes its prompt again): the cap trades that prefill for a
full batch, as a fixed cap does.

The staleness bound is not loosened: the buffer still admits no group past its staleness budget,
whatever the cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple


class EngineTotals(NamedTuple):
    """The rollout server's running totals the sizer reads (`RolloutMetrics`); a window is the
    difference of two readings."""

    request_seconds: float
    """Time integral of requests in the engine."""
    episode_seconds: float
    """Time integral of live episodes."""
    tokens: int
    """Prompt and generated tokens of every request."""
    calls: int
    """Requests sent to the engine."""

    def window_since(self, before: EngineTotals) -> tuple[float, float, float | None]:
        """This window's integrals and its requests' mean length (None: no request in it)."""
        calls = self.calls - before.calls
        tokens = (self.tokens - before.tokens) / calls if calls else None
        return (
            self.request_seconds - before.request_seconds,
            self.episode_seconds - before.episode_seconds,
            tokens,
        )


NO_TOTALS = EngineTotals(0.0, 0.0, 0, 0)


@dataclass
class InFlightSizer:
    group_size: int
    floor: int
    ceiling: int
    target: int
    """Requests the engine should hold on average (its batch)."""
    smoothing: float = 0.5
    """Weight of the past in the share's running estimate (0: the last window alone)."""
    kv_tokens: int | None = None
    """Tokens the engine's KV cache holds (None: unknown, the batch alone bounds the target)."""
    share: float | None = None
    """The running estimate of p, the share of an episode's life spent in the engine."""
    fits: int | None = None
    """Requests of the last measured length that fit in the KV cache at once (None: unknown)."""

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

    def size(
        self, request_seconds: float, episode_seconds: float, request_tokens: float | None = None
    ) -> int | None:
        """The cap for the next window, from this window's integrals (request-seconds in the
        engine, episode-seconds alive) and its requests' mean length (prompt and generated
        tokens); None when the window saw no episode (keep the cap)."""
        if request_tokens and self.kv_tokens:
            self.fits = max(1, int(self.kv_tokens // request_tokens))
        if episode_seconds <= 0.0:
            return None
        p = min(1.0, max(0.0, request_seconds / episode_seconds))
        past = self.share
        self.share = p if past is None else self.smoothing * past + (1 - self.smoothing) * p
        return self._groups(self.share)

    @property
    def batch(self) -> int:
        """Requests the engine should hold: its batch, or fewer where its KV cache holds fewer."""
        return self.target if self.fits is None else min(self.target, self.fits)

    def _groups(self, share: float) -> int:
        if share <= 0.0:
            return self.ceiling
        episodes = self.batch / share
        return max(self.floor, min(self.ceiling, math.ceil(episodes / self.group_size)))

    def size_window(self, before: EngineTotals, now: EngineTotals) -> int | None:
        """`size` over the window between two readings of the server's totals."""
        return self.size(*now.window_since(before))
