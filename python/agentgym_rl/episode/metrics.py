"""Rollout metrics: counters fed by the agent loop, the turn rule and the dispatcher.

Contract: `RolloutMetrics` is updated from one event loop (no locks). `snapshot()` returns one
flat dict: totals since start plus rates over the interval since the previous snapshot
(generated tokens/s, env steps/s, episodes/s), the engine idle ratio (fraction of the interval's
wall time with no `generate` call in flight), the time integrals of requests in the engine and of
live episodes (`request_seconds`, `episode_seconds`: in-flight sizing reads them), turns per episode (mean, max), the staleness
histogram of sent groups (learner version minus the group's oldest token version), env
failures, drift, statuses and the buffer's counters; once episodes of more than one env ended,
`by_env` holds each env's episodes, successes and windowed success rate and reward. `by_turn`
counts, since start and by turn index (1-based; `TURN_BINS` takes every later turn), the turns
played, the invalid ones, the repeated ones (the same action as the episode's turn before) and
each action kind (an action's first word, e.g. "go", "turn"; "none" for a turn that named no
action), so a reader diffs two snapshots for any interval; `repeated_actions` is their total.
`rollout/status.py` prints and records the snapshots.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agentgym_rl import _core
from agentgym_rl.episode.outcome import is_success

TURN_BINS = 32
"""`by_turn`'s last index: turns past it count there."""


class RolloutMetrics:
    """Counters of one rollout process."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self.generated_tokens = 0
        self.prompt_tokens = 0
        """Tokens of the prompts sent to the engine (its prefill work, before any cache)."""
        self.generate_calls = 0
        self.env_steps = 0
        self.invalid_actions = 0
        self.repeated_actions = 0
        self.episodes = 0
        self.env_failures = 0
        self.drift = 0
        self.aborted_episodes = 0
        self.groups_sent = 0
        self.send_timeouts = 0
        self.turns_total = 0
        self.turns_max = 0
        self.statuses: Counter[str] = Counter()
        self.staleness: Counter[int] = Counter()
        self.successes = 0
        self.env_episodes: Counter[str] = Counter()
        self.env_successes: Counter[str] = Counter()
        self.turn_counts: Counter[int] = Counter()
        self.turn_invalid: Counter[int] = Counter()
        self.turn_repeated: Counter[int] = Counter()
        self.turn_kinds: dict[int, Counter[str]] = {}
        self.forks: Counter[str] = Counter()
        """A user agent's episodes that left their token-consistent segment, by why."""
        # Episodes since the last snapshot: (env, reward, success), for windowed rates.
        self._window: list[tuple[str, float, bool]] = []
        self._in_flight = 0
        self._busy = 0.0
        self._busy_since = 0.0
        # time integrals of requests in the engine and of live episodes (in-flight sizing)
        self._requests = _Integral(clock)
        self._episodes = _Integral(clock)
        self._last: dict[str, float] = {"t": self.started, "busy": 0.0}
        self._last_totals = {"generated_tokens": 0, "env_steps": 0, "episodes": 0}

    @contextmanager
    def generating(self, prompt_tokens: int, calls: int = 1) -> Iterator[None]:
        """Wrap `calls` concurrent `engine.generate` calls whose prompts hold `prompt_tokens` in
        all: the engine is busy while any call is in flight. Every generating path counts its
        prompts here, so a request's mean length (in-flight sizing) never misses them."""
        if self._in_flight == 0:
            self._busy_since = self._clock()
        self._in_flight += 1
        self._requests.add(calls)
        self.generate_calls += calls
        self.prompt_tokens += prompt_tokens
        try:
            yield
        finally:
            self._in_flight -= 1
            self._requests.add(-calls)
            if self._in_flight == 0:
                self._busy += self._clock() - self._busy_since

    @contextmanager
    def living(self) -> Iterator[None]:
        """Wrap one episode's life, from its dispatch to its end."""
        self._episodes.add(1)
        try:
            yield
        finally:
            self._episodes.add(-1)

    def busy_seconds(self) -> float:
        live = self._clock() - self._busy_since if self._in_flight else 0.0
        return self._busy + live

    def request_seconds(self) -> float:
        """Requests in the engine, integrated over time since the start."""
        return self._requests.total()

    def episode_seconds(self) -> float:
        """Live episodes, integrated over time since the start."""
        return self._episodes.total()

    def record_episode(self, sample: _core.Sample, env: str, *, drift: bool | None = None) -> None:
        """One finished episode, by its last sample (which carries its reward, status and
        turns); `drift`: whether any of its samples drifted (default: that sample's flag)."""
        self.episodes += 1
        self.statuses[sample.status] += 1
        self.turns_total += sample.turns
        self.turns_max = max(self.turns_max, sample.turns)
        self.env_failures += sample.env_failure
        self.drift += sample.drift if drift is None else drift
        success = is_success(env, float(sample.reward), bool(sample.env_failure))
        self.successes += success
        self.env_episodes[env] += 1
        self.env_successes[env] += success
        self._window.append((env, float(sample.reward), success))

    def record_turn(
        self, turn: int, action: str | None, invalid: bool, *, repeated: bool = False
    ) -> None:
        """One played turn (1-based index), the action it named, and whether that action was
        the episode's previous turn's again."""
        k = min(turn, TURN_BINS)
        self.turn_counts[k] += 1
        self.turn_invalid[k] += invalid
        self.turn_repeated[k] += repeated
        self.repeated_actions += repeated
        kind = action.split(maxsplit=1)[0].lower() if action and action.strip() else "none"
        self.turn_kinds.setdefault(k, Counter())[kind] += 1

    def record_sent(self, group: _core.Group, learner_version: int) -> None:
        self.groups_sent += 1
        oldest = group.min_version()
        self.staleness[learner_version - (learner_version if oldest is None else oldest)] += 1

    def snapshot(
        self, buffer: dict[str, int] | None = None, version: int | None = None
    ) -> dict[str, Any]:
        """One metrics record; `success_rate`/`reward_mean` cover the episodes since the last
        snapshot (None when none ended), `successes` all of them."""
        now, busy = self._clock(), self.busy_seconds()
        window, self._window = self._window, []
        dt = max(now - self._last["t"], 1e-9)
        totals = {
            "generated_tokens": self.generated_tokens,
            "env_steps": self.env_steps,
            "episodes": self.episodes,
        }
        rates = {f"{k}_per_s": (v - self._last_totals[k]) / dt for k, v in totals.items()}
        idle = 1.0 - min(1.0, (busy - self._last["busy"]) / dt)
        self._last = {"t": now, "busy": busy}
        self._last_totals = totals
        record: dict[str, Any] = {
            "time": time.time(),
            "uptime_s": now - self.started,
            **totals,
            **rates,
            "engine_idle_ratio": idle,
            # time integrals since start: their differences over a window, divided by its
            # length, are the mean requests in the engine and the mean live episodes
            "request_seconds": self.request_seconds(),
            "episode_seconds": self.episode_seconds(),
            "generate_calls": self.generate_calls,
            "prompt_tokens": self.prompt_tokens,
            "invalid_actions": self.invalid_actions,
            "repeated_actions": self.repeated_actions,
            "turns_mean": self.turns_total / self.episodes if self.episodes else 0.0,
            "turns_max": self.turns_max,
            "env_failures": self.env_failures,
            "drift": self.drift,
            "forks": dict(self.forks),
            "aborted_episodes": self.aborted_episodes,
            "groups_sent": self.groups_sent,
            "send_timeouts": self.send_timeouts,
            "statuses": dict(self.statuses),
            "staleness": {str(k): v for k, v in sorted(self.staleness.items())},
            "successes": self.successes,
            **_rates(window),
            "window_episodes": len(window),
        }
        if len(self.env_episodes) > 1:
            record["by_env"] = {
                env: {
                    "episodes": n,
                    "successes": self.env_successes[env],
                    **_rates([w for w in window if w[0] == env]),
                }
                for env, n in sorted(self.env_episodes.items())
            }
        if self.turn_counts:
            record["by_turn"] = {
                str(k): {
                    "turns": n,
                    "invalid": self.turn_invalid[k],
                    "repeated": self.turn_repeated[k],
                    "kinds": dict(self.turn_kinds[k].most_common()),
                }
                for k, n in sorted(self.turn_counts.items())
            }
        if version is not None:
            record["version"] = version
        if buffer is not None:
            record["buffer"] = dict(buffer)
        return record


def _rates(window: list[tuple[str, float, bool]]) -> dict[str, float | None]:
    """Success rate and mean reward of the window's episodes (None when it holds none)."""
    n = len(window)
    return {
        "success_rate": sum(ok for _, _, ok in window) / n if n else None,
        "reward_mean": sum(r for _, r, _ in window) / n if n else None,
    }


class _Integral:
    """The time integral of a count that steps up and down."""

    def __init__(self, clock: Any) -> None:
        self._clock = clock
        self._count = 0
        self._area = 0.0
        self._since = clock()

    def add(self, step: int) -> None:
        now = self._clock()
        self._area += self._count * (now - self._since)
        self._count += step
        self._since = now

    def total(self) -> float:
        return self._area + self._count * (self._clock() - self._since)
