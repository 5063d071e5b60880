"""Rollout metrics: counters fed by the agent loop and dispatcher, a status line, JSONL records.

Contract: `RolloutMetrics` is updated from one event loop (no locks). `snapshot()` returns one
flat dict: totals since start plus rates over the interval since the previous snapshot
(generated tokens/s, env steps/s, episodes/s), the engine idle ratio (fraction of the interval's
wall time with no `generate` call in flight), turns per episode (mean, max), the staleness
histogram of sent groups (learner version minus the group's oldest token version), env
failures, drift, statuses and the buffer's counters. `StatusSink` prints a one-line status
(rich) and appends each snapshot as one JSON line to `<log_dir>/metrics.jsonl`.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from agentgym_rl import _core


class RolloutMetrics:
    """Counters of one rollout process."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self.generated_tokens = 0
        self.generate_calls = 0
        self.env_steps = 0
        self.invalid_actions = 0
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
        # Episodes since the last snapshot: (reward, success), for windowed rates.
        self._window: list[tuple[float, bool]] = []
        self._in_flight = 0
        self._busy = 0.0
        self._busy_since = 0.0
        self._last: dict[str, float] = {"t": self.started, "busy": 0.0}
        self._last_totals = {"generated_tokens": 0, "env_steps": 0, "episodes": 0}

    @contextmanager
    def generating(self) -> Iterator[None]:
        """Wrap one `engine.generate` call: the engine is busy while any call is in flight."""
        if self._in_flight == 0:
            self._busy_since = self._clock()
        self._in_flight += 1
        self.generate_calls += 1
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._busy += self._clock() - self._busy_since

    def busy_seconds(self) -> float:
        live = self._clock() - self._busy_since if self._in_flight else 0.0
        return self._busy + live

    def record_episode(self, sample: _core.Sample) -> None:
        self.episodes += 1
        self.statuses[sample.status] += 1
        self.turns_total += sample.turns
        self.turns_max = max(self.turns_max, sample.turns)
        self.env_failures += sample.env_failure
        self.drift += sample.drift
        success = sample.reward > 0.0 and not sample.env_failure
        self.successes += success
        self._window.append((float(sample.reward), success))

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
            "generate_calls": self.generate_calls,
            "invalid_actions": self.invalid_actions,
            "turns_mean": self.turns_total / self.episodes if self.episodes else 0.0,
            "turns_max": self.turns_max,
            "env_failures": self.env_failures,
            "drift": self.drift,
            "aborted_episodes": self.aborted_episodes,
            "groups_sent": self.groups_sent,
            "send_timeouts": self.send_timeouts,
            "statuses": dict(self.statuses),
            "staleness": {str(k): v for k, v in sorted(self.staleness.items())},
            "successes": self.successes,
            "success_rate": sum(ok for _, ok in window) / len(window) if window else None,
            "reward_mean": sum(r for r, _ in window) / len(window) if window else None,
            "window_episodes": len(window),
        }
        if version is not None:
            record["version"] = version
        if buffer is not None:
            record["buffer"] = dict(buffer)
        return record


def _rate(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.1%}"


def status_line(record: dict[str, Any]) -> str:
    """One human line from a snapshot."""
    buf = record.get("buffer", {})
    return (
        f"[bold]rollout[/] {record['uptime_s']:7.0f}s "
        f"tok/s {record['generated_tokens_per_s']:8.1f}  "
        f"steps/s {record['env_steps_per_s']:7.1f}  "
        f"eps/s {record['episodes_per_s']:5.2f}  "
        f"idle {record['engine_idle_ratio']:4.0%}  "
        f"turns {record['turns_mean']:4.1f}/{record['turns_max']}  "
        f"success {_rate(record.get('success_rate'))}  "
        f"sent {record['groups_sent']}  running {buf.get('running', 0)} "
        f"ready {buf.get('ready', 0)}  env_fail {record['env_failures']}  "
        f"drift {record['drift']}"
    )


class StatusSink:
    """Writes snapshots: a live status line on a terminal (a plain line per snapshot otherwise)
    and JSON lines in `log_dir`."""

    def __init__(self, log_dir: Path | None, *, quiet: bool = False) -> None:
        self.console = Console(stderr=True, highlight=False)
        self.quiet = quiet
        self.live: Live | None = None
        self.path: Path | None = None
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            self.path = log_dir / "metrics.jsonl"

    def write(self, record: dict[str, Any]) -> None:
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(json.dumps(record) + "\n")
        if self.quiet:
            return
        line = Text.from_markup(status_line(record))
        if not self.console.is_terminal:
            self.console.print(line, soft_wrap=True)
            return
        if self.live is None:
            self.live = Live(line, console=self.console, auto_refresh=False)
            self.live.start()
        self.live.update(line, refresh=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
