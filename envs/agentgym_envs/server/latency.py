"""Injected step latency, for benchmarks that need env steps slower and more uneven than a
simulator's (a browser, a remote API): each `step` reply waits a log-normal delay first.

The delay is awaited, never slept, so other episodes keep being served meanwhile; replies
of one batch wait for the slowest of its steps, as a server stepping them in parallel would.
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass


@dataclass
class StepLatency:
    """Log-normal delay with the given median (ms) and shape `sigma` (0 = constant)."""

    median_ms: float
    sigma: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.median_ms < 0 or self.sigma < 0:
            raise ValueError("step latency median and sigma must be >= 0")
        self._rng = random.Random(self.seed)

    def sample_s(self) -> float:
        return self.median_ms / 1000.0 * math.exp(self.sigma * self._rng.gauss(0.0, 1.0))

    async def wait(self, steps: int = 1) -> None:
        if self.median_ms > 0 and steps > 0:
            await asyncio.sleep(max(self.sample_s() for _ in range(steps)))


def count_steps(request: object) -> int:
    """How many `step` ops a (possibly batched) ZeroMQ request holds."""
    if not isinstance(request, dict):
        return 0
    if request.get("op") == "step":
        return 1
    ops = request.get("ops") if request.get("op") == "batch" else None
    return (
        sum(1 for o in ops if isinstance(o, dict) and o.get("op") == "step")
        if isinstance(ops, list)
        else 0
    )
